"""L8: reconcile settles unknown effects by lookup and never sends; compensate
and resolve move only along the state machine's paths."""

from __future__ import annotations

import datetime as dt

import pytest

from inboxguard import (
    ConfigurationError,
    EffectLedger,
    EffectOutcomeUnknownError,
    EffectState,
    InvalidTransitionError,
    ProviderRejectedError,
    Receipt,
)
from inboxguard.effects import EffectRecord
from integrations.ledger.gateway import SandboxGateway
from tests.conftest import FakeClock
from tests.effects.conftest import LEASE, WINDOW, Killed, dies_after_charge

PAYLOAD = {"amount": 100}
MINUTE = dt.timedelta(minutes=1)


def state(ledger: EffectLedger, key: str) -> EffectState:
    record = ledger.get(key)
    assert record is not None
    return record.state


def seed(ledger: EffectLedger, gw: SandboxGateway) -> None:
    """lost: charged, response lost; never: timed out before arriving;
    fine: confirmed; dead: the worker died after the charge (prepared)."""
    for key, behaviour in [("lost", "accept_then_timeout"), ("never", "timeout")]:
        gw.script = [behaviour]
        with pytest.raises(EffectOutcomeUnknownError):
            ledger.execute(key, gw, PAYLOAD, lease=LEASE)
    ledger.execute("fine", gw, PAYLOAD, lease=LEASE)
    with pytest.raises(Killed), dies_after_charge(gw):
        ledger.execute("dead", gw, PAYLOAD, lease=LEASE)


def test_l08_reconcile_settles_by_lookup_and_never_sends(
    ledger: EffectLedger, gateway: SandboxGateway, clock: FakeClock
) -> None:
    seed(ledger, gateway)
    sends = gateway.requests()
    assert ledger.reconcile(gateway, older_than=MINUTE).examined == 0  # too recent
    clock.advance(MINUTE)
    report = ledger.reconcile(gateway, older_than=MINUTE)
    assert report.examined == 3
    assert sorted(report.reconciled) == ["dead", "lost"]
    assert report.pending == ["never"]
    assert (report.needs_operator, report.skipped, report.failed) == ([], [], [])
    assert state(ledger, "lost") is EffectState.RECONCILED
    assert state(ledger, "dead") is EffectState.CONFIRMED  # prepared -> confirmed
    assert state(ledger, "never") is EffectState.UNKNOWN
    assert gateway.requests() == sends
    assert gateway.requests("lookup") == 3
    clock.advance(WINDOW)
    late = ledger.reconcile(gateway, older_than=MINUTE)
    assert (late.examined, late.needs_operator) == (1, ["never"])
    assert gateway.charges() == 3  # lost, fine, dead; "never" never arrived
    assert gateway.requests() == sends


def test_l08_reconcile_reports_a_failing_lookup_and_keeps_unknown(
    ledger: EffectLedger, gateway: SandboxGateway, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway.script = ["accept_then_timeout"]
    with pytest.raises(EffectOutcomeUnknownError):
        ledger.execute("lost", gateway, PAYLOAD, lease=LEASE)

    def down(key: str) -> Receipt | None:
        raise ConnectionError("lookup API down")

    monkeypatch.setattr(gateway, "lookup", down)
    clock.advance(MINUTE)
    report = ledger.reconcile(gateway, older_than=MINUTE)
    assert [key for key, _ in report.failed] == ["lost"]
    assert "lookup API down" in report.failed[0][1]
    record = ledger.get("lost")
    assert record is not None
    assert (record.state, record.lease_owner) == (EffectState.UNKNOWN, None)
    assert gateway.requests() == 1


def test_l08_reconcile_without_lookup_only_reports(
    ledger: EffectLedger, blind_gateway: SandboxGateway, clock: FakeClock
) -> None:
    seed(ledger, blind_gateway)
    clock.advance(MINUTE)
    report = ledger.reconcile(blind_gateway, older_than=MINUTE)
    assert sorted(report.pending) == ["dead", "lost", "never"]
    assert report.reconciled == []
    assert state(ledger, "dead") is EffectState.UNKNOWN  # its lease expired: made explicit
    assert blind_gateway.requests("lookup") == 0
    clock.advance(WINDOW)
    assert sorted(ledger.reconcile(blind_gateway, older_than=MINUTE).needs_operator) == [
        "dead",
        "lost",
        "never",
    ]


def test_l08_reconcile_skips_leased_and_other_providers(
    ledger: EffectLedger, gateway: SandboxGateway, blind_gateway: SandboxGateway, clock: FakeClock
) -> None:
    with pytest.raises(Killed), dies_after_charge(gateway):
        ledger.execute("busy", gateway, PAYLOAD, lease=dt.timedelta(hours=1))
    other = SandboxGateway(blind_gateway.engine, table_prefix="unused_", clock=clock, name="other")
    clock.advance(MINUTE)
    assert ledger.reconcile(other, older_than=MINUTE).examined == 0
    report = ledger.reconcile(gateway, older_than=MINUTE)
    assert report.skipped == ["busy"]
    assert state(ledger, "busy") is EffectState.PREPARED
    assert gateway.requests("lookup") == 0


def test_l08_compensate_a_confirmed_effect_once(
    ledger: EffectLedger, gateway: SandboxGateway
) -> None:
    receipt = ledger.execute("charge", gateway, PAYLOAD)
    calls: list[EffectRecord] = []

    def refund(record: EffectRecord) -> Receipt:
        calls.append(record)
        return Receipt("re_1", {"refunds": record.receipt.reference if record.receipt else None})

    done = ledger.compensate("charge", refund)
    again = ledger.compensate("charge", refund)
    assert len(calls) == 1
    assert calls[0].receipt == receipt
    assert done.state is again.state is EffectState.COMPENSATED
    assert done.compensation == Receipt("re_1", {"refunds": "ch_1"})
    assert done.receipt == receipt
    assert [t.event for t in done.history] == ["prepare", "confirm", "takeover", "compensate"]
    with pytest.raises(InvalidTransitionError, match="compensated"):
        ledger.execute("charge", gateway, PAYLOAD)
    assert gateway.requests() == 1


def test_l08_compensation_failure_keeps_confirmed_and_frees_the_lease(
    ledger: EffectLedger, gateway: SandboxGateway
) -> None:
    ledger.execute("charge", gateway, PAYLOAD)

    def broken(record: EffectRecord) -> Receipt:
        raise ConnectionError("refund API down")

    with pytest.raises(ConnectionError):
        ledger.compensate("charge", broken)
    record = ledger.get("charge")
    assert record is not None
    assert (record.state, record.lease_owner) == (EffectState.CONFIRMED, None)
    assert ledger.compensate("charge", lambda r: None).state is EffectState.COMPENSATED


@pytest.mark.parametrize("behaviour", ["reject", "accept_then_timeout"])
def test_l08_only_confirmed_effects_can_be_compensated(
    ledger: EffectLedger, gateway: SandboxGateway, behaviour: str
) -> None:
    gateway.script = [behaviour]
    with pytest.raises((ProviderRejectedError, EffectOutcomeUnknownError)):
        ledger.execute("charge", gateway, PAYLOAD)
    with pytest.raises(InvalidTransitionError, match="compensated"):
        ledger.compensate("charge", lambda r: None)
    with pytest.raises(InvalidTransitionError):
        ledger.compensate("missing", lambda r: None)


def test_l08_resolve_only_unknown_effects(ledger: EffectLedger, gateway: SandboxGateway) -> None:
    ledger.execute("fine", gateway, PAYLOAD)
    with pytest.raises(InvalidTransitionError, match="only an unknown effect"):
        ledger.resolve("fine", applied=False, note="n/a")
    gateway.script = ["timeout"]
    with pytest.raises(EffectOutcomeUnknownError):
        ledger.execute("lost", gateway, PAYLOAD)
    with pytest.raises(ConfigurationError, match="receipt"):
        ledger.resolve("lost", applied=True, note="no reference")
    done = ledger.resolve("lost", applied=False, note="not in the provider's dashboard")
    assert (done.state, done.applied, done.receipt) == (EffectState.RECONCILED, False, None)
    assert done.history[-1].note == "operator: not in the provider's dashboard"
    with pytest.raises(ProviderRejectedError, match="reconciled as not applied"):
        ledger.execute("lost", gateway, PAYLOAD)
    assert gateway.requests() == 1
