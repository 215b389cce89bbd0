"""L23: the idempotency window is an explicit, required part of a contract.

``None`` declares a provider without idempotency (a mailer): after an
ambiguous send the effect goes to an operator and is never re-sent.
``KEYS_KEPT_FOREVER`` declares one that never forgets a key.
"""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy.engine import Engine

from inboxguard import (
    KEYS_KEPT_FOREVER,
    EffectLedger,
    EffectOutcomeUnknownError,
    EffectState,
    ProviderContract,
    ReconciliationRequiredError,
    known_contract,
)
from integrations.ledger.gateway import SandboxGateway
from tests.conftest import FakeClock
from tests.effects.conftest import LEASE

PAYLOAD = {"to": "ada@example.com"}


def test_l23_a_contract_must_say_its_window() -> None:
    with pytest.raises(TypeError, match="idempotency_window"):
        ProviderContract(name="mailer")  # type: ignore[call-arg]
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert ProviderContract(idempotency_window=None).window_end(now) == now  # closed at once
    # The shipped contracts keep their documented windows.
    assert known_contract("stripe").idempotency_window is not None
    assert known_contract("stripe").idempotency_window != KEYS_KEPT_FOREVER


def test_l23_a_provider_without_idempotency_is_never_resent(
    ledger: EffectLedger, engine: Engine, prefix: str, clock: FakeClock
) -> None:
    """One ambiguous send to a mailer: the retry goes to the operator; one email."""
    mailer = SandboxGateway(
        engine, table_prefix=prefix + "m", window=None, supports_lookup=False, clock=clock
    )
    mailer.create_schema()
    try:
        mailer.script = ["accept_then_timeout"]
        with pytest.raises(EffectOutcomeUnknownError):
            ledger.execute("welcome-ada", mailer, PAYLOAD, lease=LEASE)
        with pytest.raises(ReconciliationRequiredError):
            ledger.execute("welcome-ada", mailer, PAYLOAD, lease=LEASE)
        record = ledger.get("welcome-ada")
        assert record is not None
        assert record.state is EffectState.UNKNOWN
        assert (mailer.requests(), mailer.charges()) == (1, 1)
        report = ledger.reconcile(mailer, older_than=LEASE * 0)
        assert report.needs_operator == ["welcome-ada"]
        assert mailer.requests() == 1
    finally:
        mailer.drop_schema()
