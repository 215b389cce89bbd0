"""The round trips a guarded Dramatiq message costs on PostgreSQL, read off
the wire: BEGIN, the guard's SAVEPOINT, the claim, the actor's own statement,
the result store, RELEASE, COMMIT; a redelivery of a committed command:
BEGIN, SAVEPOINT, the claim, RELEASE, COMMIT.
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
        "BEGIN",
        "savepoint",
        "claim",
        "body INSERT",
        "result store",
        "release",
        "COMMIT",
    ]
    assert kinds == fresh_kinds, fresh.statements
    kinds = again.kinds(prefix, f"{prefix}effects")
    assert kinds == ["BEGIN", "savepoint", "claim", "release", "COMMIT"], again.statements
