"""A worker process forked after ``InboxMiddleware`` is built starts on a
fresh pool of the engines the middleware knows (D16), on a real PostgreSQL.

Dramatiq's command imports the broker module in each worker process, so
nothing is shared there; an application that builds the middleware (and
connects) before it forks, with ``multiprocessing`` or its own pool, is
what this covers.
"""

from __future__ import annotations

import datetime as dt
import multiprocessing
from multiprocessing.queues import Queue
from typing import Any

import pytest
from dramatiq.brokers.stub import StubBroker
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.dramatiq import InboxMiddleware

pytestmark = pytest.mark.postgresql


def _backend_pid(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def _child(engine: Engine, out: Queue[Any]) -> None:
    out.put(_backend_pid(engine))


def test_d16_a_forked_worker_process_never_uses_the_parents_pooled_connection(
    pg_url: str, prefix: str
) -> None:
    """A module-level engine with the default pool connects in the parent
    (the start-up check does); the forked child's checkout is a connection of
    its own (another server backend), not the parent's socket."""
    engine = create_engine(pg_url)  # the default pool, no recipe
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    broker = StubBroker()
    broker.add_middleware(InboxMiddleware(inbox, session_factory=sessionmaker(engine)))
    parent = _backend_pid(engine)  # now pooled: a child would inherit it
    context = multiprocessing.get_context("fork")
    out: Queue[Any] = context.Queue()
    child = context.Process(target=_child, args=(engine, out))
    child.start()
    try:
        seen = out.get(timeout=30)
    finally:
        child.join(30)
    assert seen != parent
    assert _backend_pid(engine) == parent  # the parent keeps its own connection
    broker.close()
    engine.dispose()


@pytest.mark.e2e
@pytest.mark.parametrize("broker_name", ["redis"], indirect=True)
def test_d16_two_dramatiq_worker_processes_apply_every_command_once(
    app_settings: Any, producer: Any, start_worker: Any, engine: Engine
) -> None:
    """The reference app (a module-level engine, no fork recipe) under
    ``dramatiq --processes 2``: each process works on its own connections and
    every command is applied exactly once."""
    from integrations.dramatiq.model import applications
    from integrations.dramatiq.producer import ship_message
    from tests.adapters.dramatiq.test_e2e import results_of

    worker = start_worker(threads=2, processes=2)
    worker.wait_ready()
    orders = [f"fork-{i}" for i in range(40)]
    messages = [producer.enqueue(ship_message(app_settings.queue, o, qty=3)) for o in orders]
    results_of(messages)
    assert applications(engine, app_settings.prefix) == dict.fromkeys(orders, 1)
    assert "command status" not in worker.text()
