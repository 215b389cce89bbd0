"""L2-L6: execute on each database: prepare-commit-send-record, the stored
receipt on repeats, rejections, payload mismatches and ambiguous outcomes."""

from __future__ import annotations

from decimal import Decimal

import pytest
from sqlalchemy.engine import Engine

from inboxguard import (
    ConfigurationError,
    EffectLedger,
    EffectOutcomeUnknownError,
    EffectPayloadConflictError,
    EffectState,
    InvalidCommandError,
    PayloadMismatchError,
    ProviderRejectedError,
    Receipt,
    is_retryable,
)
from integrations.ledger.gateway import SandboxGateway
from tests.conftest import FakeClock
from tests.effects.conftest import LEASE

KEY = "invoice-42/charge"
PAYLOAD = {"amount": 4200, "currency": "EUR", "customer": "c-7"}


def events(ledger: EffectLedger, key: str = KEY) -> list[str]:
    record = ledger.get(key)
    assert record is not None
    return [t.event for t in record.history]


def test_l02_prepared_is_committed_before_the_provider_is_called(
    ledger: EffectLedger, gateway: SandboxGateway
) -> None:
    """While send runs, another connection already sees 'prepared' with a lease."""
    seen: list[tuple[EffectState, int, bool]] = []

    def observe(key: str) -> None:
        record = ledger.get(key)
        assert record is not None
        seen.append((record.state, record.fencing_token, record.lease_expires_at is not None))

    gateway.after_apply = observe
    receipt = ledger.execute(KEY, gateway, PAYLOAD, lease=LEASE)
    assert seen == [(EffectState.PREPARED, 1, True)]
    record = ledger.get(KEY)
    assert record is not None
    assert record.state is EffectState.CONFIRMED
    assert (record.version, record.attempts, record.applied) == (2, 1, True)
    assert record.receipt == receipt == Receipt("ch_1", {"idempotency_key": KEY})
    assert record.lease_owner is None
    assert [(t.from_state, t.to_state, t.event) for t in record.history] == [
        (None, EffectState.PREPARED, "prepare"),
        (EffectState.PREPARED, EffectState.CONFIRMED, "confirm"),
    ]
    assert all(t.actor == "test" for t in record.history)
    assert (gateway.requests(), gateway.charges()) == (1, 1)


def test_l03_repeat_returns_the_stored_receipt_without_calling(
    ledger: EffectLedger, gateway: SandboxGateway, clock: FakeClock
) -> None:
    first = ledger.execute(KEY, gateway, PAYLOAD)
    clock.advance(LEASE * 1000)
    for _ in range(3):
        assert ledger.execute(KEY, gateway, dict(reversed(PAYLOAD.items()))) == first
    assert (gateway.requests(), gateway.requests("lookup"), gateway.charges()) == (1, 0, 1)
    record = ledger.get(KEY)
    assert record is not None
    assert record.version == 2


def test_l04_rejection_is_recorded_and_final(ledger: EffectLedger, gateway: SandboxGateway) -> None:
    gateway.script = ["reject"]
    with pytest.raises(ProviderRejectedError) as info:
        ledger.execute(KEY, gateway, PAYLOAD)
    assert info.value.effect_key == KEY
    assert info.value.reason == "card_declined"
    assert not is_retryable(info.value)
    with pytest.raises(ProviderRejectedError, match="rejected by the provider"):
        ledger.execute(KEY, gateway, PAYLOAD)
    record = ledger.get(KEY)
    assert record is not None
    assert (record.state, record.version, record.applied, record.receipt) == (
        EffectState.REJECTED,
        2,
        False,
        None,
    )
    assert "card declined" in (record.last_error or "")
    assert (gateway.requests(), gateway.charges()) == (1, 0)


def test_l05_same_key_other_payload_fails_closed(
    ledger: EffectLedger, gateway: SandboxGateway
) -> None:
    ledger.execute(KEY, gateway, PAYLOAD)
    with pytest.raises(EffectPayloadConflictError) as info:
        ledger.execute(KEY, gateway, {**PAYLOAD, "amount": 9999})
    assert (info.value.command_id, info.value.effect_key) == (KEY, KEY)
    assert info.value.consumer is None  # nothing was quarantined
    assert not info.value.quarantined
    assert info.value.stored_digest != info.value.incoming_digest
    assert not isinstance(info.value, PayloadMismatchError)
    assert "nothing was sent" in str(info.value)
    assert (gateway.requests(), gateway.charges()) == (1, 1)
    record = ledger.get(KEY)
    assert record is not None
    assert (record.state, record.version) == (EffectState.CONFIRMED, 2)


def test_l05_text_and_a_number_with_the_same_spelling_conflict(
    ledger: EffectLedger, gateway: SandboxGateway
) -> None:
    """An effect recorded with the text "12.5" is refused when executed again
    with the number Decimal("12.5"): one digest form, no second one beside it.
    The provider is called once."""
    payload = {**PAYLOAD, "amount": "12.5"}
    first = ledger.execute(KEY, gateway, payload)
    with pytest.raises(EffectPayloadConflictError):
        ledger.execute(KEY, gateway, {**payload, "amount": Decimal("12.5")})
    assert ledger.execute(KEY, gateway, payload) == first
    assert (gateway.requests(), gateway.charges()) == (1, 1)


def test_l05_mismatch_is_refused_even_while_unknown(
    ledger: EffectLedger, gateway: SandboxGateway
) -> None:
    gateway.script = ["accept_then_timeout"]
    with pytest.raises(EffectOutcomeUnknownError):
        ledger.execute(KEY, gateway, PAYLOAD)
    with pytest.raises(EffectPayloadConflictError):
        ledger.execute(KEY, gateway, {**PAYLOAD, "amount": 1})
    assert (gateway.requests(), gateway.requests("lookup"), gateway.charges()) == (1, 0, 1)


@pytest.mark.parametrize("behaviour", ["accept_then_timeout", "timeout", "connection_error"])
def test_l06_ambiguous_outcome_is_recorded_unknown(
    ledger: EffectLedger, gateway: SandboxGateway, behaviour: str
) -> None:
    gateway.script = [behaviour]
    with pytest.raises(EffectOutcomeUnknownError) as info:
        ledger.execute(KEY, gateway, PAYLOAD)
    assert is_retryable(info.value)
    assert isinstance(info.value.__cause__, TimeoutError | ConnectionError)
    record = ledger.get(KEY)
    assert record is not None
    assert (record.state, record.version, record.lease_owner) == (EffectState.UNKNOWN, 2, None)
    assert behaviour in {"timeout", "connection_error"} or gateway.charges() == 1


def test_l06_unexpected_send_error_is_unknown_and_reraised(
    ledger: EffectLedger, gateway: SandboxGateway
) -> None:
    gateway.script = ["not-a-behaviour"]
    with pytest.raises(ValueError, match="unknown behaviour"):
        ledger.execute(KEY, gateway, PAYLOAD)
    record = ledger.get(KEY)
    assert record is not None
    assert record.state is EffectState.UNKNOWN
    assert "ValueError" in (record.last_error or "")


def test_l02_schema_is_idempotent_and_bad_keys_write_nothing(
    ledger: EffectLedger, gateway: SandboxGateway, engine: Engine
) -> None:
    ledger.create_schema()
    ledger.create_schema()
    for bad in ["", " padded", "x" * 256, 42]:
        with pytest.raises(InvalidCommandError, match="effect_key"):
            ledger.execute(bad, gateway, PAYLOAD)  # type: ignore[arg-type]
    assert ledger.effects() == []
    assert gateway.requests() == 0
    with pytest.raises(ConfigurationError, match="unknown"):
        ledger.effects(state="lost")
