"""L9: provider contracts are data with sources; bad contracts and receipts are refused."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from inboxguard import (
    KEYS_KEPT_FOREVER,
    ConfigurationError,
    MismatchBehaviour,
    Provider,
    ProviderContract,
    Receipt,
    known_contract,
)
from inboxguard.effects.contracts import KNOWN_CONTRACTS


def test_l09_shipped_contracts_state_their_sources() -> None:
    stripe = known_contract("stripe")
    assert stripe.idempotency_window == dt.timedelta(hours=24)
    assert stripe.on_mismatch is MismatchBehaviour.REJECT
    assert stripe.supports_lookup is False
    assert known_contract("adyen").idempotency_window == dt.timedelta(days=31)
    assert known_contract("qonto").on_mismatch is MismatchBehaviour.REPLAY
    for name, contract in KNOWN_CONTRACTS.items():
        assert contract.name == name
        assert contract.source is not None, name
        assert contract.source.startswith("https://"), name
        assert contract.idempotency_window is not None, name
    with pytest.raises(KeyError, match="stripe"):
        known_contract("no-such-provider")


def test_l09_contract_can_declare_a_lookup_the_adapter_implements() -> None:
    stripe = dataclasses.replace(known_contract("stripe"), supports_lookup=True)
    assert stripe.supports_lookup is True
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert stripe.window_end(start) == start + dt.timedelta(hours=24)
    forever = ProviderContract(idempotency_window=KEYS_KEPT_FOREVER)
    assert forever.window_end(start) is None
    assert forever.remembers(start, start + dt.timedelta(days=10_000))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"idempotency_window": dt.timedelta(0)}, "idempotency_window"),
        ({"idempotency_window": 3600}, "idempotency_window"),
        ({"supports_lookup": "yes"}, "supports_lookup"),
        ({"on_mismatch": "explode"}, "on_mismatch"),
    ],
)
def test_l09_bad_contract_names_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigurationError, match=field):
        ProviderContract(**{"idempotency_window": None, **kwargs})  # type: ignore[arg-type]


def test_l09_on_mismatch_accepts_its_string_value() -> None:
    contract = ProviderContract(idempotency_window=None, on_mismatch="reject")  # type: ignore[arg-type]
    assert contract.on_mismatch is MismatchBehaviour.REJECT


@pytest.mark.parametrize("reference", ["", None, "x" * 256, 42])
def test_l09_receipt_needs_a_reference(reference: object) -> None:
    with pytest.raises(ConfigurationError, match="reference"):
        Receipt(reference)  # type: ignore[arg-type]


def test_l09_gateway_satisfies_the_provider_protocol(gateway: object) -> None:
    assert isinstance(gateway, Provider)
