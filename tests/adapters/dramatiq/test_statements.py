"""The round trips a guarded Dramatiq message costs on PostgreSQL, read off
the wire: BEGIN with the guard's SAVEPOINT (one query), the claim, the actor's
own statement, the result store, RELEASE with COMMIT (one query); a
redelivery of a committed command: BEGIN with SAVEPOINT, the claim, RELEASE
with COMMIT.
Nothing else (no check, lookup or session set-up) per message."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import dramatiq
import pytest
from dramatiq import Worker
from dramatiq.brokers.stub import StubBroker
from dramatiq.results import Results
from dramatiq.results.backends import StubBackend
from sqlalchemy import Column, Integer, MetaData, String, Table, insert
from sqlalchemy.engine import Engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.dramatiq import InboxMiddleware
from tests.adapters.wire import traced

pytestmark = pytest.mark.postgresql


def test_guarded_message_sends_claim_body_result_store_and_nothing_else(
    one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    engine = one_connection
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=7), table_prefix=prefix)
    inbox.create_schema()
    effects = Table(
        f"{prefix}effects", MetaData(), Column("id", Integer, primary_key=True),
        Column("order_id", String(40)),
    )  # fmt: skip
    effects.create(engine)
    broker = StubBroker()
    broker.emit_after("process_boot")
    broker.add_middleware(Results(backend=StubBackend()))
    broker.add_middleware(InboxMiddleware(inbox, session_factory=sessionmaker(engine)))

    @dramatiq.actor(broker=broker, inbox_command_id="order_id", store_results=True, max_retries=3)
    def ship(order_id: str) -> dict[str, Any]:
        inboxguard.current_session().execute(insert(effects).values(order_id=order_id))
        return {"shipped": order_id}

    worker = Worker(broker, worker_timeout=50, worker_threads=1)
    worker.start()
    try:
        ship.send("o-0")  # the first message opens the connection
        broker.join(ship.queue_name)
        worker.join()
        with traced(engine, tmp_path) as fresh:
            ship.send("o-1")
            broker.join(ship.queue_name)
            worker.join()
        with traced(engine, tmp_path) as again:
            ship.send("o-1")
            broker.join(ship.queue_name)
            worker.join()
    finally:
        worker.stop()
        broker.close()
        effects.drop(engine)
        inbox.drop_schema()

    kinds = fresh.kinds(prefix, f"{prefix}effects")
    fresh_kinds = [
        "BEGIN + savepoint + claim",
        "body INSERT",
        "result store + release + COMMIT",
    ]
    assert kinds == fresh_kinds, fresh.statements
    kinds = again.kinds(prefix, f"{prefix}effects")
    assert kinds == ["BEGIN + savepoint + claim", "release + COMMIT"], again.statements


def _results_stored(engine: Engine, prefix: str) -> dict[str, Any]:
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(f"SELECT command_id, result FROM {prefix}inbox").all()
    return dict(rows)


def test_d22_an_actor_nothing_stores_the_result_of_sends_no_result_store(
    one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    """Without a Results middleware that stores the actor's result, nothing
    can read what a duplicate would replay: the guard sends no result store
    (the evidence row holds no result), and a duplicate still runs nothing.
    The same actor called directly keeps its result, since its caller reads
    the return value."""
    engine = one_connection
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=7), table_prefix=prefix)
    inbox.create_schema()
    effects = Table(
        f"{prefix}effects", MetaData(), Column("id", Integer, primary_key=True),
        Column("order_id", String(40)),
    )  # fmt: skip
    effects.create(engine)
    broker = StubBroker()
    broker.emit_after("process_boot")
    broker.add_middleware(Results(backend=StubBackend()))  # present, but not for this actor
    broker.add_middleware(InboxMiddleware(inbox, session_factory=sessionmaker(engine)))

    @dramatiq.actor(broker=broker, inbox_command_id="order_id", max_retries=3)
    def ship(order_id: str) -> dict[str, Any]:
        inboxguard.current_session().execute(insert(effects).values(order_id=order_id))
        return {"shipped": order_id}

    worker = Worker(broker, worker_timeout=50, worker_threads=1)
    worker.start()
    try:
        ship.send("o-0")  # the first message opens the connection
        broker.join(ship.queue_name)
        worker.join()
        with traced(engine, tmp_path) as fresh:
            ship.send("o-1")
            broker.join(ship.queue_name)
            worker.join()
        with traced(engine, tmp_path) as again:
            ship.send("o-1")
            broker.join(ship.queue_name)
            worker.join()
        direct = ship("o-2")
        stored = _results_stored(engine, prefix)
        with engine.connect() as conn:
            applied = conn.execute(effects.select()).all()
    finally:
        worker.stop()
        broker.close()
        effects.drop(engine)
        inbox.drop_schema()

    assert fresh.kinds(prefix, f"{prefix}effects") == [
        "BEGIN + savepoint + claim",
        "body INSERT",
        "release + COMMIT",
    ], fresh.statements
    kinds = again.kinds(prefix, f"{prefix}effects")
    assert kinds == ["BEGIN + savepoint + claim", "release + COMMIT"], again.statements
    assert sorted(order for _, order in applied) == ["o-0", "o-1", "o-2"]
    assert stored["o-0"] is None
    assert stored["o-1"] is None
    assert direct == {"shipped": "o-2"}
    assert stored["o-2"] is not None  # a direct call's caller reads its result
