"""InboxMiddleware with ``async def`` actors on Dramatiq's StubBroker, on
SQLite (aiosqlite) and PostgreSQL (asyncpg): the same outcomes as sync actors,
with the body running on Dramatiq's event loop thread. Also the
``retries_exhausted`` quarantine of a busy command, for both kinds of actor."""

from __future__ import annotations

import datetime as dt
import functools
import inspect
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import dramatiq
import pytest
from dramatiq import Middleware, Retry, Worker
from dramatiq.asyncio import EventLoopThread, get_event_loop_thread
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import AsyncIO
from dramatiq.results import Results
from dramatiq.results.backends import StubBackend
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, insert, select
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

import inboxguard
from inboxguard.adapters.dramatiq import InboxMiddleware

QUEUE = "default"
ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}


class Spy(Middleware):
    """Records the exception of every processed message."""

    def __init__(self) -> None:
        self.exceptions: list[BaseException | None] = []

    def after_process_message(self, broker: Any, message: Any, *, result=None, exception=None):
        self.exceptions.append(exception)


@dataclass
class Db:
    """A database seen through a sync engine (inbox, checks) and an async URL."""

    name: str
    engine: Engine
    inbox: inboxguard.Inbox
    effects: Table
    aurl: str


def wait_until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.02)


@contextmanager
def database(name: str, url: str, prefix: str) -> Iterator[Db]:
    """The inbox and an ``effects`` table on ``url``; dropped afterwards."""
    engine = create_engine(url)
    policy = inboxguard.RetentionPolicy(replay=dt.timedelta(days=60))
    inbox = inboxguard.Inbox(
        engine, retention=policy, table_prefix=prefix, lock_timeout=dt.timedelta(seconds=0.3)
    )
    inbox.create_schema()
    meta = MetaData()
    effects = Table(
        f"{prefix}effects",
        meta,
        Column("id", Integer, primary_key=True),
        Column("order_id", String(40)),
        Column("qty", Integer),
    )
    meta.create_all(engine)
    rest = url.split("://", 1)[1]
    try:
        yield Db(name, engine, inbox, effects, f"{ASYNC_DRIVERS[name]}://{rest}")
    finally:
        meta.drop_all(engine)
        inbox.drop_schema()
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, prefix: str) -> Iterator[Db]:
    """Each database with an asyncio driver in turn."""
    url = request.getfixturevalue({"sqlite": "sqlite_url", "postgresql": "pg_url"}[request.param])
    with database(request.param, str(url), prefix) as found:
        yield found


@pytest.fixture
def pg_db(pg_url: str, prefix: str) -> Iterator[Db]:
    """PostgreSQL only: there a quarantine record can be written while another
    transaction holds the command (SQLite locks the whole file)."""
    with database("postgresql", pg_url, prefix) as found:
        yield found


def make_broker(database: Db, *, asyncio: bool = True) -> Any:
    broker = StubBroker()
    broker.emit_after("process_boot")
    if asyncio:
        broker.add_middleware(AsyncIO())
    broker.backend = StubBackend()
    broker.add_middleware(Results(backend=broker.backend))
    broker.spy = Spy()
    broker.add_middleware(broker.spy)
    aengine = create_async_engine(database.aurl, poolclass=NullPool)
    broker.add_middleware(
        InboxMiddleware(
            database.inbox,
            session_factory=sessionmaker(database.engine),
            async_session_factory=async_sessionmaker(aengine),
            busy_delay=dt.timedelta(milliseconds=20),
        )
    )
    return broker


@pytest.fixture
def stub(db: Db) -> Iterator[Any]:
    broker = make_broker(db)
    running = Worker(broker, worker_timeout=50, worker_threads=2)
    running.start()
    yield broker
    running.stop()
    broker.flush_all()
    broker.close()


def declare_async(broker: Any, effects: Table, **options: Any) -> Any:
    seen: list[tuple[str, threading.Thread]] = []
    options.setdefault("store_results", True)
    options.setdefault("min_backoff", 10)
    options.setdefault("inbox_command_id", "order_id")

    @dramatiq.actor(broker=broker, **options)
    async def apply(order_id: str, qty: int) -> dict[str, int]:
        seen.append((order_id, threading.current_thread()))
        session = inboxguard.current_session()
        await session.execute(insert(effects).values(order_id=order_id, qty=qty))
        return {"qty": qty}

    apply.seen = seen
    return apply


def rows(database: Db) -> list[tuple[str, int]]:
    table = database.effects
    with database.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(table.c.order_id, table.c.qty))]


def test_async_actor_stays_async_and_runs_on_the_event_loop(stub: Any, db: Db) -> None:
    """The guarded actor is still a coroutine function to Dramatiq, and its
    body runs on the AsyncIO middleware's event loop thread."""
    apply = declare_async(stub, db.effects)
    assert inspect.iscoroutinefunction(inspect.unwrap(apply.fn))
    apply.send("o-1", 3)
    stub.join(QUEUE)

    assert [(o, type(t)) for o, t in apply.seen] == [("o-1", EventLoopThread)]
    assert rows(db) == [("o-1", 3)]


def test_fresh_then_duplicate_runs_once_and_returns_the_stored_result(stub: Any, db: Db) -> None:
    """A second message for the same command is acked with the first result
    without running the body."""
    apply = declare_async(stub, db.effects, inbox_consumer="orders.apply")
    first = apply.send("o-1", 3)
    stub.join(QUEUE)
    second = apply.send("o-1", 3)
    stub.join(QUEUE)

    assert rows(db) == [("o-1", 3)]
    assert [o for o, _ in apply.seen] == ["o-1"]
    assert stub.backend.get_result(second) == stub.backend.get_result(first) == {"qty": 3}
    assert stub.dead_letters == []
    record = db.inbox.lookup("orders.apply", "o-1")
    assert record is not None
    assert record.result == {"qty": 3}


def test_mismatch_is_quarantined_and_dead_lettered_without_retry(stub: Any, db: Db) -> None:
    """Same command, other payload: dead-lettered at once, quarantined with
    the message's details, business state untouched."""
    apply = declare_async(stub, db.effects)
    apply.send("o-1", 3)
    stub.join(QUEUE)
    tampered = apply.send("o-1", 4)
    stub.join(QUEUE, fail_fast=False)

    [dead] = stub.dead_letters
    assert dead.message_id == tampered.message_id
    assert "retries" not in dead.options
    assert isinstance(stub.spy.exceptions[-1], inboxguard.PayloadMismatchError)
    [record] = db.inbox.quarantined("apply")
    assert record.reason == "payload_mismatch"
    assert record.details["message_id"] == tampered.message_id
    assert record.details["args"] == ["o-1", 4]
    assert rows(db) == [("o-1", 3)]


def test_busy_claim_is_retried_then_applied_once(stub: Any, db: Db) -> None:
    """While another transaction holds the command the message is retried
    (dramatiq.Retry), not acked; it is applied once the holder rolls back."""
    apply = declare_async(stub, db.effects)
    payload = {"args": ["o-1", 3], "kwargs": {}}
    with Session(db.engine) as holder, holder.begin():
        with db.inbox.guard(holder, consumer="apply", command_id="o-1", payload=payload):
            apply.send("o-1", 3)
            wait_until(
                lambda: any(isinstance(e, Retry) for e in stub.spy.exceptions), 10, "a Retry"
            )
        holder.rollback()
    stub.join(QUEUE)

    retry = next(e for e in stub.spy.exceptions if isinstance(e, Retry))
    assert isinstance(retry.__cause__, inboxguard.InProgressError)
    assert rows(db) == [("o-1", 3)]
    assert stub.dead_letters == []
    assert db.inbox.quarantined() == []  # retries were left: nothing given up


def test_async_actor_without_async_session_factory_is_refused(db: Db) -> None:
    """Declaring a guarded async actor without an async session factory fails
    at declaration and says what to pass."""
    broker = StubBroker()
    broker.add_middleware(InboxMiddleware(db.inbox, session_factory=sessionmaker(db.engine)))

    async def f(order_id: str) -> None:
        return None

    with pytest.raises(inboxguard.ConfigurationError, match="async_session_factory=async_session"):
        dramatiq.actor(f, broker=broker, inbox_command_id="order_id")
    broker.close()


def test_worker_without_asyncio_middleware_refuses_to_boot(db: Db) -> None:
    """Without Dramatiq's AsyncIO middleware an async actor could never run:
    the worker refuses to start instead of retrying every message."""
    broker = make_broker(db, asyncio=False)
    declare_async(broker, db.effects)
    with pytest.raises(inboxguard.ConfigurationError, match="AsyncIO"):
        Worker(broker, worker_timeout=50).start()
    broker.close()


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_busy_command_out_of_retries_is_quarantined_and_dead_lettered(pg_db: Db, kind: str) -> None:
    """A command still busy on its last Dramatiq retry is quarantined as
    ``retries_exhausted`` (with the message's details) and dead-lettered;
    it is never applied by that message."""
    broker = make_broker(pg_db)
    running = Worker(broker, worker_timeout=50, worker_threads=1)
    running.start()
    try:
        if kind == "async":
            apply = declare_async(broker, pg_db.effects, max_retries=1)
        else:
            table = pg_db.effects

            @dramatiq.actor(
                broker=broker, max_retries=1, min_backoff=10, inbox_command_id="order_id"
            )
            def apply(order_id: str, qty: int) -> None:
                inboxguard.current_session().execute(
                    insert(table).values(order_id=order_id, qty=qty)
                )

        payload = {"args": ["o-1", 3], "kwargs": {}}
        with Session(pg_db.engine) as holder, holder.begin():
            with pg_db.inbox.guard(holder, consumer="apply", command_id="o-1", payload=payload):
                message = apply.send("o-1", 3)
                wait_until(lambda: broker.dead_letters, 20, "the message to be dead-lettered")
            holder.rollback()
        broker.join(QUEUE, fail_fast=False)
    finally:
        running.stop()
        broker.close()

    assert [m.message_id for m in broker.dead_letters] == [message.message_id]
    assert [type(e) for e in broker.spy.exceptions] == [Retry, Retry]
    [record] = pg_db.inbox.quarantined("apply")
    assert record.reason == "retries_exhausted"
    assert record.occurrences == 1  # the last retry only, not the first
    assert record.details["message_id"] == message.message_id
    assert "InProgressError" in record.details["last_error"]
    assert rows(pg_db) == []


def test_refused_boot_stops_the_event_loop_thread(db: Db, prefix: str) -> None:
    """An AsyncIO middleware listed first has started its (non-daemon) event
    loop thread when the inbox refuses to boot: the refusal stops it, so a
    refused ``dramatiq`` process exits instead of hanging."""
    short = inboxguard.Inbox(db.engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    broker = make_broker(db)
    middleware = next(m for m in broker.middleware if isinstance(m, InboxMiddleware))
    middleware.inbox = short  # a 1-day horizon under the 20-retry default schedule
    declare_async(broker, db.effects, min_backoff=15000)
    with pytest.raises(inboxguard.RetentionMisalignedError):
        Worker(broker, worker_timeout=50).start()
    broker.close()

    assert get_event_loop_thread() is None
    assert not [t for t in threading.enumerate() if isinstance(t, EventLoopThread)]


def test_the_users_own_decorators_stay_in_place(stub: Any, db: Db) -> None:
    """Only Dramatiq's own async_to_sync layer is peeled: a decorator of the
    user's (functools.wraps) still runs, inside the guard, once per command."""
    traced: list[str] = []

    def trace(fn: Any) -> Any:
        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            traced.append(args[0])
            return await fn(*args, **kwargs)

        return wrapper

    table = db.effects

    @dramatiq.actor(broker=stub, inbox_command_id="order_id")
    @trace
    async def apply(order_id: str, qty: int) -> None:
        await inboxguard.current_session().execute(insert(table).values(order_id=order_id, qty=qty))

    apply.send("o-1", 3)
    apply.send("o-1", 3)
    stub.join(QUEUE)

    assert traced == ["o-1"]
    assert rows(db) == [("o-1", 3)]


def test_a_sync_function_wrapping_a_coroutine_function_is_refused(db: Db) -> None:
    """A plain function that merely wraps an async def one cannot be told to
    run on a loop or not: refused at declaration, with the fix."""
    broker = make_broker(db)

    async def inner(order_id: str) -> None:
        return None

    @functools.wraps(inner)
    def outer(order_id: str) -> None:
        return None

    with pytest.raises(inboxguard.ConfigurationError, match="declare the async def function"):
        dramatiq.actor(outer, broker=broker, inbox_command_id="order_id")
    broker.close()
