"""L14-L18: the ledger under partial failure inside one worker, and the
compensation of a charge whatever path settled it.

L14: one contended effect does not stop a reconcile pass. L15: a
``BaseException`` from ``send`` records ``unknown``; a receipt the database
refuses is still recorded as applied. L16: engines whose pool shares one
connection are refused. L17: the ledger inside an inbox guard on the same
SQLite database is refused at once. L18: a charge settled as ``reconciled``
(applied) is compensable like a ``confirmed`` one.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import time
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.pool import SingletonThreadPool, StaticPool

from inboxguard import (
    ConfigurationError,
    EffectLedger,
    EffectOutcomeUnknownError,
    EffectState,
    Inbox,
    InvalidTransitionError,
    Receipt,
    ReconciliationRequiredError,
)
from inboxguard.effects import EffectRecord
from integrations.ledger.gateway import SandboxGateway
from tests.conftest import FakeClock
from tests.effects.conftest import LEASE, WINDOW, Killed, dies_after_charge

PAYLOAD = {"amount": 100}
MINUTE = dt.timedelta(minutes=1)


def record_of(ledger: EffectLedger, key: str) -> EffectRecord:
    record = ledger.get(key)
    assert record is not None
    return record


# -- L14: reconcile goes on past a contended effect -----------------------------------


def test_l14_reconcile_reports_a_contended_effect_as_skipped_and_goes_on(
    ledger: EffectLedger, gateway: SandboxGateway, clock: FakeClock, engine: Engine, prefix: str
) -> None:
    """While the pass looks "a" up, another worker takes "a" over and settles
    it: the pass's write is fenced out (StaleLeaseError), "a" is reported as
    skipped, and "b" is still reconciled."""
    for key in ("a", "b"):
        gateway.script = ["accept_then_timeout"]
        with pytest.raises(EffectOutcomeUnknownError):
            ledger.execute(key, gateway, PAYLOAD, lease=LEASE)
    other = EffectLedger(engine, table_prefix=prefix, clock=clock, actor="other")
    real_lookup = gateway.lookup
    raced: list[str] = []

    def racing_lookup(key: str) -> Receipt | None:
        if key == "a" and not raced:
            raced.append(key)
            clock.advance(LEASE * 2)  # the pass's lease expires mid-lookup ...
            other.execute("a", gateway, PAYLOAD, lease=LEASE)  # ... and "a" is taken over
        return real_lookup(key)

    gateway.lookup = racing_lookup  # type: ignore[method-assign,assignment]
    clock.advance(MINUTE)
    report = ledger.reconcile(gateway, older_than=MINUTE, lease=LEASE)
    assert report.examined == 2
    assert report.skipped == ["a"]
    assert report.reconciled == ["b"]
    for key in ("a", "b"):
        assert record_of(ledger, key).state is EffectState.RECONCILED
    assert gateway.charges() == 2
    assert gateway.requests() == 2  # reconcile never sends


# -- L15: a BaseException from send, a receipt the database refuses ---------------------


class GreenletTimeout(BaseException):
    """Like gevent's Timeout: a BaseException raised inside a blocking call."""


@pytest.mark.parametrize("escape", [KeyboardInterrupt, SystemExit, GreenletTimeout])
def test_l15_a_base_exception_from_send_records_unknown_and_is_reraised(
    ledger: EffectLedger, gateway: SandboxGateway, escape: type[BaseException]
) -> None:
    def interrupted(key: str) -> None:
        raise escape("interrupted after the charge")

    gateway.after_apply = interrupted
    with pytest.raises(escape):
        ledger.execute("k", gateway, PAYLOAD, lease=LEASE)
    gateway.after_apply = None
    record = record_of(ledger, "k")
    assert (record.state, record.lease_owner, record.lease_expires_at) == (
        EffectState.UNKNOWN,
        None,
        None,
    )
    assert record.last_error is not None
    assert escape.__name__ in record.last_error
    # No lease to wait for: the very next attempt settles it by lookup.
    receipt = ledger.execute("k", gateway, PAYLOAD, lease=LEASE)
    assert receipt.reference == "ch_1"
    assert record_of(ledger, "k").state is EffectState.RECONCILED
    assert (gateway.requests(), gateway.charges()) == (1, 1)


def test_l15_a_base_exception_from_lookup_leaves_unknown_without_a_lease(
    ledger: EffectLedger, gateway: SandboxGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway.script = ["accept_then_timeout"]
    with pytest.raises(EffectOutcomeUnknownError):
        ledger.execute("k", gateway, PAYLOAD, lease=LEASE)

    def interrupted(key: str) -> Receipt | None:
        raise GreenletTimeout("interrupted during the lookup")

    monkeypatch.setattr(gateway, "lookup", interrupted)
    with pytest.raises(GreenletTimeout):
        ledger.execute("k", gateway, PAYLOAD, lease=LEASE)
    record = record_of(ledger, "k")
    assert (record.state, record.lease_owner) == (EffectState.UNKNOWN, None)
    monkeypatch.undo()
    assert ledger.execute("k", gateway, PAYLOAD, lease=LEASE).reference == "ch_1"
    assert gateway.charges() == 1


class UnstorableReceipts:
    """The gateway, answering with a reference no database driver accepts."""

    def __init__(self, gateway: SandboxGateway) -> None:
        self.gateway = gateway
        self.contract = gateway.contract

    def send(self, key: str, payload: Any) -> Receipt:
        done = self.gateway.send(key, payload)
        return Receipt(done.reference + "\ud800", {"note": "lone surrogate"})

    def lookup(self, key: str) -> Receipt | None:
        return self.gateway.lookup(key)


def test_l15_a_receipt_the_database_refuses_is_still_recorded_as_applied(
    ledger: EffectLedger, gateway: SandboxGateway
) -> None:
    provider = UnstorableReceipts(gateway)
    receipt = ledger.execute("k", provider, PAYLOAD, lease=LEASE)
    assert receipt.reference == "ch_1\ud800"  # the caller gets what the provider said
    record = record_of(ledger, "k")
    assert (record.state, record.applied, record.lease_owner) == (
        EffectState.CONFIRMED,
        True,
        None,
    )
    stored = Receipt("ch_1\\ud800", {"note": "lone surrogate"})
    assert record.receipt == stored
    note = record.history[-1].note
    assert note is not None
    assert "stored escaped" in note
    # Later calls return the stored receipt; nothing is sent again.
    assert ledger.execute("k", provider, PAYLOAD, lease=LEASE) == stored
    assert (gateway.requests(), gateway.charges()) == (1, 1)


# -- L16: pools that hand out the caller's own connection ---------------------------------


@pytest.mark.parametrize("pool", [SingletonThreadPool, StaticPool])
def test_l16_an_engine_sharing_one_connection_is_refused(
    db_url: str, pool: type[Any], prefix: str
) -> None:
    shared = create_engine(db_url, poolclass=pool)
    try:
        with pytest.raises(ConfigurationError, match=r"effect ledger.*roll back") as info:
            EffectLedger(shared, table_prefix=prefix)
        assert pool.__name__ in str(info.value) or "one connection" in str(info.value)
    finally:
        shared.dispose()


def test_l16_in_memory_sqlite_is_refused_naming_a_file_instead() -> None:
    memory = create_engine("sqlite://")
    with pytest.raises(ConfigurationError, match="a database file instead of ':memory:'"):
        EffectLedger(memory)
    memory.dispose()


def test_l16_guard_write_execute_write_commit_keeps_every_write(
    pg_url: str, prefix: str, clock: FakeClock
) -> None:
    """The documented order inside a guard, on PostgreSQL: a shared pool is
    refused before anything is written; with the default pool the first
    write, the second one, the inbox evidence and the charge all stay."""
    with pytest.raises(ConfigurationError, match="effect ledger"):
        EffectLedger(create_engine(pg_url, poolclass=StaticPool), table_prefix=prefix)
    engine = create_engine(pg_url)
    inbox = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix, clock=clock)
    ledger = EffectLedger(engine, table_prefix=prefix, clock=clock)
    gateway = SandboxGateway(engine, table_prefix=prefix, clock=clock)
    notes = f"{prefix}notes"
    for part in (inbox, ledger, gateway):
        part.create_schema()
    try:
        with engine.begin() as conn:
            conn.execute(text(f"CREATE TABLE {notes} (what VARCHAR(40))"))
        with (
            engine.connect() as conn,
            conn.begin(),
            inbox.guard(conn, consumer="billing", command_id="cmd-1", payload=PAYLOAD) as entry,
        ):
            conn.execute(text(f"INSERT INTO {notes} VALUES ('before the charge')"))
            receipt = ledger.execute("invoice-1/charge", gateway, PAYLOAD)
            conn.execute(text(f"INSERT INTO {notes} VALUES ('after the charge')"))
            entry.result = {"charge": receipt.reference}
        with engine.connect() as conn:
            rows = sorted(r[0] for r in conn.execute(text(f"SELECT what FROM {notes}")))
        assert rows == ["after the charge", "before the charge"]
        assert inbox.lookup("billing", "cmd-1") is not None
        assert record_of(ledger, "invoice-1/charge").state is EffectState.CONFIRMED
        assert gateway.charges() == 1
    finally:
        with engine.begin() as conn:
            conn.execute(text(f"DROP TABLE IF EXISTS {notes}"))
        for part in (gateway, ledger, inbox):
            part.drop_schema()
        engine.dispose()


# -- L17: the ledger inside a guard on the same SQLite database -------------------------


@pytest.fixture
def sqlite_parts(tmp_path: Any, clock: FakeClock) -> Any:
    path = tmp_path / "shop.db"
    engine = create_engine(f"sqlite:///{path}")
    inbox = Inbox(engine, retention=dt.timedelta(days=1), clock=clock)
    gateway = SandboxGateway(engine, table_prefix="gw_", clock=clock)
    for part in (inbox, gateway):
        part.create_schema()
    yield path, engine, inbox, gateway
    engine.dispose()


@pytest.mark.parametrize("spelling", ["same engine", "symlinked path"])
def test_l17_sqlite_ledger_inside_the_guard_is_refused_at_once_naming_the_order(
    sqlite_parts: Any, clock: FakeClock, spelling: str
) -> None:
    path, engine, inbox, gateway = sqlite_parts
    if spelling == "symlinked path":
        link = path.parent / "link.db"
        os.symlink(path, link)
        ledger_engine = create_engine(f"sqlite:///{link}")
    else:
        ledger_engine = engine
    ledger = EffectLedger(ledger_engine, clock=clock)
    ledger.create_schema()
    started = time.monotonic()
    with (
        pytest.raises(ConfigurationError, match=r"call ledger\.execute\(\.\.\.\) first") as info,
        engine.connect() as conn,
        conn.begin(),
        inbox.guard(conn, consumer="billing", command_id="cmd-1", payload=PAYLOAD),
    ):
        ledger.execute("invoice-1/charge", gateway, PAYLOAD)
    assert time.monotonic() - started < 2  # no busy-timeout wait
    assert "SQLite" in str(info.value)
    assert ledger.get("invoice-1/charge") is None
    assert gateway.requests() == 0
    assert inbox.lookup("billing", "cmd-1") is None  # the guard rolled back
    # The documented order: the effect first, then the guarded transaction.
    receipt = ledger.execute("invoice-1/charge", gateway, PAYLOAD)
    with (
        engine.connect() as conn,
        conn.begin(),
        inbox.guard(conn, consumer="billing", command_id="cmd-1", payload=PAYLOAD) as entry,
    ):
        entry.result = {"charge": receipt.reference}
    assert inbox.lookup("billing", "cmd-1") is not None
    assert gateway.charges() == 1
    ledger_engine.dispose()


def test_l17_a_guard_on_another_database_does_not_stop_a_sqlite_ledger(
    sqlite_parts: Any, tmp_path: Any, clock: FakeClock
) -> None:
    _, _, _, gateway = sqlite_parts
    other = create_engine(f"sqlite:///{tmp_path / 'orders.db'}")
    orders = Inbox(other, retention=dt.timedelta(days=1), clock=clock)
    orders.create_schema()
    ledger = EffectLedger(create_engine(f"sqlite:///{tmp_path / 'ledger.db'}"), clock=clock)
    ledger.create_schema()
    with (
        other.connect() as conn,
        conn.begin(),
        orders.guard(conn, consumer="c", command_id="cmd-1", payload=PAYLOAD),
    ):
        assert ledger.execute("k", gateway, PAYLOAD).reference == "ch_1"
    other.dispose()
    ledger.engine.dispose()


# -- L18: compensate whatever path settled the charge -----------------------------------


def refund_of(calls: list[EffectRecord]) -> Any:
    def refund(record: EffectRecord) -> Receipt:
        calls.append(record)
        assert record.receipt is not None
        return Receipt(f"re_{record.receipt.reference}")

    return refund


@pytest.mark.parametrize("path", ["timeout then same-key re-send", "crash then lookup"])
def test_l18_a_charge_is_compensable_whichever_path_settled_it(
    ledger: EffectLedger,
    gateway: SandboxGateway,
    blind_gateway: SandboxGateway,
    clock: FakeClock,
    path: str,
) -> None:
    if path == "timeout then same-key re-send":
        gw = blind_gateway
        gw.script = ["accept_then_timeout"]
        with pytest.raises(EffectOutcomeUnknownError):
            ledger.execute("k", gw, PAYLOAD, lease=LEASE)
        settled_as = EffectState.RECONCILED
    else:
        gw = gateway
        with pytest.raises(Killed), dies_after_charge(gw):
            ledger.execute("k", gw, PAYLOAD, lease=LEASE)
        clock.advance(LEASE)
        settled_as = EffectState.CONFIRMED
    charge = ledger.execute("k", gw, PAYLOAD, lease=LEASE)
    before = record_of(ledger, "k")
    assert (before.state, before.applied) == (settled_as, True)
    calls: list[EffectRecord] = []
    done = ledger.compensate("k", refund_of(calls))
    assert done.state is EffectState.COMPENSATED
    assert done.compensation == Receipt(f"re_{charge.reference}")
    assert ledger.compensate("k", refund_of(calls)).state is EffectState.COMPENSATED
    assert len(calls) == 1
    assert gw.charges() == 1


def test_l18_a_charge_reconciled_as_not_applied_is_not_compensated(
    ledger: EffectLedger, blind_gateway: SandboxGateway, clock: FakeClock
) -> None:
    blind_gateway.script = ["timeout"]
    with pytest.raises(EffectOutcomeUnknownError):
        ledger.execute("k", blind_gateway, PAYLOAD, lease=LEASE)
    ledger.resolve("k", applied=False, note="not at the provider")
    calls: list[EffectRecord] = []
    with pytest.raises(InvalidTransitionError, match="nothing to compensate"):
        ledger.compensate("k", refund_of(calls))
    assert calls == []
    assert record_of(ledger, "k").state is EffectState.RECONCILED


# -- the log line of a closed window ----------------------------------------------------


def test_l07_a_closed_window_logs_that_nothing_was_resent(
    ledger: EffectLedger,
    blind_gateway: SandboxGateway,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    blind_gateway.script = ["accept_then_timeout"]
    with pytest.raises(EffectOutcomeUnknownError):
        ledger.execute("k", blind_gateway, PAYLOAD, lease=LEASE)
    clock.advance(WINDOW)
    caplog.clear()
    with (
        caplog.at_level(logging.WARNING, "inboxguard.effects"),
        pytest.raises(ReconciliationRequiredError),
    ):
        ledger.execute("k", blind_gateway, PAYLOAD, lease=LEASE)
    lines = [r.getMessage() for r in caplog.records]
    assert any(
        "outcome still unknown after takeover" in line and "nothing re-sent" in line
        for line in lines
    ), lines
    assert not any("after resend" in line for line in lines), lines
    assert blind_gateway.requests() == 1
