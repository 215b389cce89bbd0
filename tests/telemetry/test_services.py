"""M5-M6: the outbox dispatcher's sends, failures, dead rows and dispatch lag;
the ledger's reconciliations by verdict; purge rows and duration."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

import inboxguard
from integrations.ledger.gateway import SandboxGateway
from tests.conftest import FakeClock
from tests.telemetry.conftest import Sdk


@pytest.fixture
def sqlite_engine(sqlite_url: str) -> Iterator[Engine]:
    engine = create_engine(sqlite_url)
    yield engine
    engine.dispose()


def test_m5_dispatcher_counts_sends_failures_dead_rows_and_times_the_lag(
    sdk: Sdk, sqlite_engine: Engine, prefix: str, clock: FakeClock
) -> None:
    outbox = inboxguard.Outbox(sqlite_engine, table_prefix=prefix, clock=clock)
    outbox.create_schema()
    with Session(sqlite_engine) as session, session.begin():
        for cid in ("ok1", "ok2", "bad"):
            outbox.add(session, command_id=cid, destination="payments", payload={"id": cid})
    clock.advance(dt.timedelta(seconds=7))  # the rows waited 7 s before their send

    def transport(message: inboxguard.OutboxMessage) -> Any:
        if message.command_id == "bad":
            raise ConnectionError("broker down")
        return {"ok": True}

    dispatcher = inboxguard.Dispatcher(
        outbox, transport, max_attempts=2, backoff=lambda _: dt.timedelta(0)
    )
    assert dispatcher.run_once() == 2
    dispatcher.run_once()  # the second failure of "bad" marks it dead
    assert sdk.total("inboxguard.outbox.sends") == 2
    assert sdk.total("inboxguard.outbox.failures") == 1
    assert sdk.total("inboxguard.outbox.dead") == 1
    [lag] = sdk.points("inboxguard.outbox.dispatch_lag")
    assert lag.count == 2
    assert lag.sum == pytest.approx(14.0)
    assert dict(lag.attributes) == {"messaging.destination.name": "payments"}
    assert dispatcher.stats.dead == 1


def test_m5_a_dispatcher_with_telemetry_off_records_nothing(
    sdk: Sdk, sqlite_engine: Engine, prefix: str
) -> None:
    outbox = inboxguard.Outbox(sqlite_engine, table_prefix=prefix)
    outbox.create_schema()
    with Session(sqlite_engine) as session, session.begin():
        outbox.add(session, command_id="a", destination="d", payload={})
    dispatcher = inboxguard.Dispatcher(outbox, lambda m: None, telemetry=False)
    assert dispatcher.run_once() == 1
    assert sdk.points("inboxguard.outbox.sends") == []


def test_m6_reconcile_counts_each_verdict(
    sdk: Sdk, sqlite_engine: Engine, prefix: str, clock: FakeClock
) -> None:
    ledger = inboxguard.EffectLedger(sqlite_engine, table_prefix=prefix, clock=clock, actor="t")
    ledger.create_schema()
    gateway = SandboxGateway(sqlite_engine, table_prefix=prefix, clock=clock)
    gateway.create_schema()
    gateway.script = ["accept_then_timeout", "timeout"]
    for key in ("charged", "lost"):
        with pytest.raises(inboxguard.EffectOutcomeUnknownError):
            ledger.execute(key, gateway, {"amount": 5})
    clock.advance(dt.timedelta(minutes=10))
    report = ledger.reconcile(gateway)
    assert report.reconciled == ["charged"]
    assert report.pending == ["lost"]
    assert sdk.total("inboxguard.effects.reconciliations", verdict="reconciled") == 1
    assert sdk.total("inboxguard.effects.reconciliations", verdict="pending") == 1
    assert sdk.total("inboxguard.effects.reconciliations", verdict="needs_operator") == 0


def test_m6_purge_counts_deleted_rows_and_its_duration(
    sdk: Sdk, sqlite_engine: Engine, prefix: str, clock: FakeClock
) -> None:
    box = inboxguard.Inbox(
        sqlite_engine, retention=dt.timedelta(hours=1), table_prefix=prefix, clock=clock
    )
    box.create_schema()
    for cid in ("a", "b", "c"):
        with Session(sqlite_engine) as session, session.begin():
            with box.guard(session, consumer="p", command_id=cid, payload={}):
                pass
    clock.advance(dt.timedelta(hours=2))
    assert box.purge().deleted == 3
    assert sdk.total("inboxguard.purge.rows", table="inbox") == 3
    assert sdk.total("inboxguard.purge.duration") == 1
