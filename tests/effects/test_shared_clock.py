"""L24-L26: time the ledger's workers agree on, and calls that outlive a lease.

L24: leases, ``first_sent_at`` and windows are read from the database
server's clock, so a worker whose own clock runs fast cannot stretch a
provider's window. L25: a receipt that arrives after the worker's lease was
taken over is recorded (and settles the effect when it is still unknown).
L26: a compensator slower than its lease keeps the lease (a heartbeat) and is
not run a second time.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from inboxguard import (
    EffectLedger,
    EffectOutcomeUnknownError,
    EffectState,
    Receipt,
    ReconciliationRequiredError,
    ServerClock,
)
from inboxguard._core.clock import utc_now
from inboxguard.effects import EffectRecord
from integrations.ledger.gateway import SandboxGateway
from tests.conftest import FakeClock
from tests.effects.conftest import LEASE
from tests.outbox.helpers import wait_until

PAYLOAD = {"amount": 100}


@pytest.fixture(params=["postgresql", "mysql"])
def server_engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    """An engine on each database that has a server (and so a clock of its own)."""
    url = request.getfixturevalue({"postgresql": "pg_url", "mysql": "mysql_url"}[request.param])
    engine = create_engine(url)
    yield engine
    engine.dispose()


def test_l24_the_server_clock_tells_the_database_time(server_engine: Engine) -> None:
    clock = ServerClock(server_engine, refresh=0.0)
    first = clock()
    assert first.utcoffset() == dt.timedelta(0)
    assert abs(first - utc_now()) < dt.timedelta(seconds=5)  # one machine here
    assert clock() >= first  # never goes back


def test_l24_a_fast_worker_clock_does_not_reopen_a_closed_window(
    server_engine: Engine, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker ten seconds fast sends first (ambiguously); the provider forgets
    the key after three seconds; a correct worker retries after that. The
    retry must not re-send: it would charge the customer twice."""
    window = dt.timedelta(seconds=3)
    gateway = SandboxGateway(
        server_engine, table_prefix=prefix, window=window, supports_lookup=False
    )
    gateway.create_schema()
    fast_now = lambda: utc_now() + dt.timedelta(seconds=10)  # noqa: E731
    # The fast host: its wall clock (utc_now) runs ten seconds ahead while this
    # ledger is built, so a ledger that took the host's clock would keep it.
    monkeypatch.setattr("inboxguard.effects._ledger.utc_now", fast_now, raising=False)
    fast = EffectLedger(server_engine, table_prefix=prefix, actor="fast")
    monkeypatch.undo()
    fast.create_schema()
    try:
        gateway.script = ["accept_then_timeout"]
        with pytest.raises(EffectOutcomeUnknownError):
            fast.execute("charge-1", gateway, PAYLOAD, lease=dt.timedelta(seconds=1))
        charged_at = utc_now()
        wait_until(lambda: utc_now() > charged_at + window + dt.timedelta(seconds=0.5), 30)
        correct = EffectLedger(server_engine, table_prefix=prefix, actor="correct")
        with pytest.raises(ReconciliationRequiredError):
            correct.execute("charge-1", gateway, PAYLOAD, lease=dt.timedelta(seconds=1))
        assert gateway.charges() == 1
    finally:
        fast.drop_schema()
        gateway.drop_schema()


def test_l25_a_receipt_after_a_takeover_is_recorded(
    ledger: EffectLedger, blind_gateway: SandboxGateway, clock: FakeClock
) -> None:
    """The call outlives its lease; reconcile takes the effect over and marks
    it unknown; then the provider's answer arrives: it settles the effect."""
    reports: list[Any] = []

    def reconcile_meanwhile(key: str) -> None:
        clock.advance(LEASE * 2)
        reports.append(ledger.reconcile(blind_gateway, older_than=dt.timedelta(0)))

    blind_gateway.after_apply = reconcile_meanwhile
    receipt = ledger.execute("k", blind_gateway, PAYLOAD, lease=LEASE)
    assert receipt.reference == "ch_1"
    assert reports[0].needs_operator == ["k"] or reports[0].pending == ["k"]
    record = ledger.get("k")
    assert record is not None
    assert (record.state, record.applied) == (EffectState.RECONCILED, True)
    assert record.receipt is not None
    assert record.receipt.reference == "ch_1"
    assert any("late receipt 'ch_1'" in (t.note or "") for t in record.history)
    assert blind_gateway.charges() == 1


def test_l25_a_late_receipt_is_kept_in_the_history_when_another_worker_decided(
    ledger: EffectLedger, blind_gateway: SandboxGateway, clock: FakeClock
) -> None:
    def resolve_meanwhile(key: str) -> None:
        clock.advance(LEASE * 2)
        ledger.reconcile(blind_gateway, older_than=dt.timedelta(0))
        ledger.resolve(key, applied=True, receipt=Receipt("ch_1"), note="seen in the dashboard")

    blind_gateway.after_apply = resolve_meanwhile
    with pytest.raises(Exception, match="taken over"):
        ledger.execute("k", blind_gateway, PAYLOAD, lease=LEASE)
    record = ledger.get("k")
    assert record is not None
    assert record.state is EffectState.RECONCILED
    assert record.history[-1].event == "late_receipt"
    assert "ch_1" in (record.history[-1].note or "")


def test_l26_a_compensator_slower_than_its_lease_runs_once(pg_url: str, prefix: str) -> None:
    engine = create_engine(pg_url)
    lease = dt.timedelta(seconds=3)
    gateway = SandboxGateway(engine, table_prefix=prefix)
    gateway.create_schema()
    ledger = EffectLedger(engine, table_prefix=prefix, actor="refunds")
    ledger.create_schema()
    calls: list[str] = []
    release = threading.Event()

    def slow_refund(record: EffectRecord) -> Receipt:
        calls.append(record.effect_key)
        if len(calls) == 1:
            release.wait(60)
        return Receipt(f"re_{len(calls)}")

    try:
        ledger.execute("k", gateway, PAYLOAD, lease=lease)
        first = threading.Thread(
            target=ledger.compensate, args=("k", slow_refund), kwargs={"lease": lease}
        )
        first.start()
        wait_until(lambda: calls, 30)
        started = time.monotonic()
        wait_until(lambda: time.monotonic() - started > lease.total_seconds() + 1, 30)
        # The first lease would have run out by now; the heartbeat kept it.
        with pytest.raises(EffectOutcomeUnknownError):
            ledger.compensate("k", slow_refund, lease=lease)
        release.set()
        first.join(30)
        record = ledger.get("k")
        assert record is not None
        assert record.state is EffectState.COMPENSATED
        assert calls == ["k"]
    finally:
        release.set()
        ledger.drop_schema()
        gateway.drop_schema()
        engine.dispose()
