"""X11-X12: the kit fits a handler that only writes to its database, and its
late replay carries a sent time for a Celery task and a Dramatiq actor, on
SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import dramatiq
import pytest
from celery import Celery
from dramatiq.brokers.stub import StubBroker
from sqlalchemy import Column, Integer, MetaData, String, Table, func, insert, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

import inboxguard
from inboxguard.adapters.celery import InboxTask
from inboxguard.adapters.dramatiq import InboxMiddleware
from inboxguard.errors import ConfigurationError
from inboxguard.testing import (
    EffectivelyOnceError,
    FakeProvider,
    FaultKit,
    ManualClock,
    assert_effectively_once,
)

MESSAGE = {"order_id": "order-5", "sku": "tea"}
CONSUMER = "orders.reserve"


@pytest.fixture
def kit(engine: Engine, prefix: str) -> Iterator[FaultKit]:
    """The kit as the ``inboxguard_kit`` fixture wires it: ledger and provider included."""
    clock = ManualClock()
    inbox = inboxguard.Inbox(
        engine, retention=dt.timedelta(days=7), table_prefix=prefix, clock=clock
    )
    ledger = inboxguard.EffectLedger(engine, table_prefix=prefix, clock=clock)
    inbox.create_schema()
    ledger.create_schema()
    yield FaultKit(inbox, ledger=ledger, provider=FakeProvider(clock=clock), clock=clock)
    ledger.drop_schema()
    inbox.drop_schema()


@pytest.fixture
def reservations(engine: Engine, prefix: str) -> Iterator[Table]:
    """The application's own table: a double reservation shows as two rows."""
    metadata = MetaData()
    table = Table(
        f"{prefix}reservations",
        metadata,
        Column("id", Integer, primary_key=True),
        Column("order_id", String(64), nullable=False),
    )
    metadata.create_all(engine)
    yield table
    metadata.drop_all(engine)


def rows(engine: Engine, table: Table) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def plain_handler(kit: FaultKit, table: Table) -> Callable[[dict[str, Any]], Any]:
    def reserve(message: dict[str, Any]) -> Any:
        with Session(kit.inbox.engine) as session, session.begin():
            with kit.inbox.guard(
                session, consumer=CONSUMER, command_id=message["order_id"], payload=message
            ) as entry:
                if entry.duplicate:
                    return entry.result
                session.execute(insert(table).values(order_id=message["order_id"]))
                entry.result = {"reserved": message["order_id"]}
        return entry.result

    return reserve


def celery_task(kit: FaultKit, table: Table) -> Any:
    """A guarded task on an app of its own: a shared task would depend on which
    Celery app other test modules left current."""
    app = Celery("kit-tests", set_as_current=False)

    @app.task(
        base=InboxTask,
        inbox=kit.inbox,
        inbox_session_factory=sessionmaker(kit.inbox.engine),
        inbox_command_id="order_id",
        inbox_consumer=CONSUMER,
        name=f"orders.reserve.{uuid.uuid4().hex}",
    )
    def reserve(order_id: str, sku: str) -> dict[str, str]:
        inboxguard.current_session().execute(insert(table).values(order_id=order_id))
        return {"reserved": order_id}

    return reserve


@pytest.fixture
def dramatiq_actor(kit: FaultKit, reservations: Table) -> Iterator[Any]:
    broker = StubBroker()
    broker.add_middleware(
        InboxMiddleware(kit.inbox, session_factory=sessionmaker(kit.inbox.engine))
    )

    @dramatiq.actor(
        broker=broker,
        actor_name=f"reserve_{uuid.uuid4().hex[:8]}",
        inbox_command_id="order_id",
        inbox_consumer=CONSUMER,
    )
    def reserve(order_id: str, sku: str) -> dict[str, str]:
        inboxguard.current_session().execute(insert(reservations).values(order_id=order_id))
        return {"reserved": order_id}

    yield reserve
    broker.close()


def test_x11_a_database_only_handler_passes_the_documented_assertion(
    kit: FaultKit, reservations: Table, engine: Engine
) -> None:
    """No effect attempted: only the inbox row is judged, with ledger and provider wired."""
    record = kit.deliver_twice(plain_handler(kit, reservations), MESSAGE)
    assert (record.deliveries, record.handler_runs, record.provider_requests) == (2, 1, 0)
    assert_effectively_once(record)
    assert rows(engine, reservations) == 1


def test_x11_a_celery_task_that_only_writes_passes_too(
    kit: FaultKit, reservations: Table, engine: Engine
) -> None:
    record = kit.deliver_twice(celery_task(kit, reservations), MESSAGE)
    assert record.outcomes == ["acked", "acked"]
    assert_effectively_once(record)
    assert rows(engine, reservations) == 1


def test_x11_a_missing_inbox_row_still_fails_and_a_named_effect_is_still_checked(
    kit: FaultKit, reservations: Table
) -> None:
    """The relaxation covers the ledger and provider only: the inbox row is
    still required, and an ``effect_key`` the caller names must exist."""

    def unguarded(message: dict[str, Any]) -> None:
        with kit.inbox.engine.begin() as conn:
            conn.execute(insert(reservations).values(order_id=message["order_id"]))

    record = kit.deliver_twice(unguarded, MESSAGE)
    with pytest.raises(EffectivelyOnceError, match="inbox: 0 rows"):
        assert_effectively_once(record, consumer=CONSUMER, command_id=MESSAGE["order_id"])
    done = kit.deliver(plain_handler(kit, reservations), MESSAGE)
    assert_effectively_once(done)
    with pytest.raises(EffectivelyOnceError, match="ledger: no effect 'order-5/charge'"):
        assert_effectively_once(done, effect_key="order-5/charge")


def test_x11_a_provider_called_outside_the_ledger_is_named(
    kit: FaultKit, reservations: Table
) -> None:
    """The hint points at the mistake, not at effect_key=."""
    assert kit.provider is not None
    provider, guarded = kit.provider, plain_handler(kit, reservations)

    def charges_twice(message: dict[str, Any]) -> Any:
        provider.send(f"{message['order_id']}/a", {"n": 1})
        provider.send(f"{message['order_id']}/b", {"n": 2})
        return guarded(message)

    record = kit.deliver(charges_twice, MESSAGE)
    with pytest.raises(EffectivelyOnceError, match=r"outside ledger\.execute"):
        assert_effectively_once(record)


def test_x12_a_celery_replay_after_retention_carries_its_sent_time(
    kit: FaultKit, reservations: Table, engine: Engine
) -> None:
    """The kit stamps x-inbox-sent-at: the late replay is refused, not re-run."""
    record = kit.replay_after_retention(celery_task(kit, reservations), MESSAGE)
    assert record.outcomes == ["acked", "dead-lettered: BeyondRetentionError"]
    assert record.inbox_state == "absent, quarantined (beyond_retention)"
    assert rows(engine, reservations) == 1


def test_x12_a_dramatiq_replay_after_retention_carries_its_sent_time(
    kit: FaultKit, reservations: Table, engine: Engine, dramatiq_actor: Any
) -> None:
    record = kit.replay_after_retention(dramatiq_actor, MESSAGE)
    assert record.outcomes == ["acked", "dead-lettered: BeyondRetentionError"]
    assert record.inbox_state == "absent, quarantined (beyond_retention)"
    assert rows(engine, reservations) == 1


def test_x12_a_target_that_cannot_carry_a_sent_time_is_refused(
    kit: FaultKit, reservations: Table, engine: Engine
) -> None:
    """A plain function without sent_at_key: refused before any delivery."""
    with pytest.raises(ConfigurationError, match="sent_at_key='sent_at'"):
        kit.replay_after_retention(plain_handler(kit, reservations), MESSAGE)
    assert rows(engine, reservations) == 0
