"""L20-L22: the ledger records every outcome whatever text comes with it.

L20: an ambiguous send whose error text holds a NUL or a lone surrogate is
recorded ``unknown``. L21: a refusal with such text is recorded ``rejected``
and stays final. L22: a receipt too large to store is recorded ``confirmed``
with its reference, and the caller gets ``ReceiptTooLargeError``.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from inboxguard import (
    EffectLedger,
    EffectOutcomeUnknownError,
    EffectState,
    ProviderRejectedError,
    Receipt,
    ReceiptTooLargeError,
)
from inboxguard._core.text import MAX_RECEIPT_DETAILS
from inboxguard.effects import EffectRecord
from integrations.ledger.gateway import SandboxGateway
from tests.effects.conftest import LEASE

PAYLOAD = {"amount": 100}
#: Text no database stores as given: a NUL (PostgreSQL) and a lone surrogate (all).
POISON = "card \x00 number \ud800 here"


def record_of(ledger: EffectLedger, key: str) -> EffectRecord:
    record = ledger.get(key)
    assert record is not None
    return record


class Answering:
    """The gateway, with ``answer`` deciding what its send does after the request."""

    def __init__(self, gateway: SandboxGateway, answer: Any) -> None:
        self.gateway = gateway
        self.contract = gateway.contract
        self.answer = answer

    def send(self, key: str, payload: Any) -> Receipt:
        done = self.gateway.send(key, payload)
        return self.answer(done)  # type: ignore[no-any-return]

    def lookup(self, key: str) -> Receipt | None:
        return self.gateway.lookup(key)


def _timeout(done: Receipt) -> Receipt:
    raise TimeoutError(f"response lost while quoting {POISON}")


def _reject(done: Receipt) -> Receipt:
    raise ProviderRejectedError(f"declined: {POISON}", reason="card_declined")


def test_l20_an_ambiguous_send_with_poison_text_is_recorded_unknown(
    ledger: EffectLedger, gateway: SandboxGateway
) -> None:
    with pytest.raises(EffectOutcomeUnknownError):
        ledger.execute("k", Answering(gateway, _timeout), PAYLOAD, lease=LEASE)
    record = record_of(ledger, "k")
    assert (record.state, record.lease_owner) == (EffectState.UNKNOWN, None)
    assert record.last_error is not None
    assert "card \\x00 number \\ud800 here" in record.last_error
    # The retry settles it by lookup; the customer was charged once.
    assert ledger.execute("k", gateway, PAYLOAD, lease=LEASE).reference == "ch_1"
    assert gateway.charges() == 1


def test_l21_a_refusal_with_poison_text_is_recorded_and_final(
    ledger: EffectLedger, gateway: SandboxGateway
) -> None:
    provider = Answering(gateway, _reject)
    with pytest.raises(ProviderRejectedError):
        ledger.execute("k", provider, PAYLOAD, lease=LEASE)
    record = record_of(ledger, "k")
    assert (record.state, record.applied) == (EffectState.REJECTED, False)
    assert record.last_error is not None
    assert "\\x00" in record.last_error
    # Final: a later attempt raises again without reaching the provider.
    with pytest.raises(ProviderRejectedError):
        ledger.execute("k", gateway, PAYLOAD, lease=LEASE)
    assert gateway.requests() == 1


def test_l22_a_receipt_too_large_to_store_is_recorded_and_refused_clearly(
    ledger: EffectLedger, gateway: SandboxGateway, caplog: pytest.LogCaptureFixture
) -> None:
    """17 MB of details: over MariaDB's default 16 MiB ``max_allowed_packet``
    and over the ledger's limit on every database."""
    blob = "x" * 17_000_000
    provider = Answering(gateway, lambda done: Receipt(done.reference, {"pdf": blob}))
    with caplog.at_level(logging.WARNING, "inboxguard"), pytest.raises(ReceiptTooLargeError) as e:
        ledger.execute("k", provider, PAYLOAD, lease=LEASE)
    assert not e.value.retryable
    assert "ch_1" in str(e.value)
    assert str(MAX_RECEIPT_DETAILS) in str(e.value)
    record = record_of(ledger, "k")
    assert (record.state, record.applied, record.lease_owner) == (
        EffectState.CONFIRMED,
        True,
        None,
    )
    assert record.receipt is not None
    assert record.receipt.reference == "ch_1"
    assert record.receipt.details is not None
    assert record.receipt.details["details_too_large"] > MAX_RECEIPT_DETAILS
    note = record.history[-1].note
    assert note is not None
    assert "over the limit" in note
    assert len(note) < 1000
    # The whole receipt is in the log, so nothing the provider said is lost.
    assert any(blob in r.getMessage() for r in caplog.records)
    # A redelivery returns the stored receipt and sends nothing.
    assert ledger.execute("k", provider, PAYLOAD, lease=LEASE).reference == "ch_1"
    assert (gateway.requests(), gateway.charges()) == (1, 1)
