"""C6 with real database faults: PostgreSQL itself raises each one.

A guarded task's first attempt writes its business row, then meets a fault
that the server produces: a deadlock with another transaction, a
serialization failure under REPEATABLE READ, its connection terminated in
the middle of the transaction, or its connection terminated at COMMIT. Each
time the attempt rolls back, the task is retried (never acked away), and the
retry applies the command exactly once. The task runs in-process with
``apply()``; the broker side of a retry is covered by the end-to-end tests.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from celery import Celery
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, event, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

import inboxguard
from inboxguard.adapters.celery import inbox_task
from tests.conftest import unique
from tests.helpers import count

pytestmark = pytest.mark.postgresql


@dataclass
class Bench:
    """A PostgreSQL inbox, a business table with two accounts, and what happened."""

    engine: Engine
    inbox: inboxguard.Inbox
    accounts: Table
    ledger: Table
    errors: list[str] = field(default_factory=list)  # what the server raised, in order
    attempts: int = 0


@pytest.fixture
def bench(pg_url: str, prefix: str) -> Iterator[Bench]:
    engine = create_engine(pg_url)
    box = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    box.create_schema()
    meta = MetaData()
    accounts = Table(
        f"{prefix}accounts",
        meta,
        Column("id", Integer, primary_key=True),
        Column("balance", Integer, nullable=False),
    )
    ledger = Table(
        f"{prefix}ledger", meta, Column("id", Integer, primary_key=True), Column("ref", String(64))
    )
    meta.create_all(engine)
    with engine.begin() as conn:
        conn.execute(accounts.insert(), [{"id": 1, "balance": 0}, {"id": 2, "balance": 0}])
    bench = Bench(engine, box, accounts, ledger)

    def on_error(context: Any) -> None:
        orig = context.original_exception
        code = getattr(orig, "sqlstate", None)
        kind = "disconnect" if context.is_disconnect else str(code)
        bench.errors.append(kind if context.statement else f"{kind} at COMMIT")

    event.listen(engine, "handle_error", on_error)
    try:
        yield bench
    finally:
        event.remove(engine, "handle_error", on_error)
        meta.drop_all(engine)
        box.drop_schema()
        engine.dispose()


def _wait(predicate: Callable[[], object], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _scalar(engine: Engine, sql: str, **params: Any) -> Any:
    with engine.connect() as conn:
        return conn.execute(text(sql), params).scalar()


def _terminate(engine: Engine, session: Session) -> None:
    """Kill the server process of ``session``'s connection, and wait until it is gone."""
    pid = session.execute(text("SELECT pg_backend_pid()")).scalar_one()
    assert _scalar(engine, "SELECT pg_terminate_backend(:pid)", pid=pid)
    alive = "SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"
    _wait(lambda: _scalar(engine, alive, pid=pid) == 0, f"backend {pid} to exit")


def _move(table: Table, account: int) -> Any:
    return table.update().where(table.c.id == account).values(balance=table.c.balance + 1)


def deadlock(bench: Bench, session: Session) -> None:
    """This transaction locks account 1, another locks 2 then waits for 1; this
    one then asks for 2. The server detects the cycle and aborts this one (its
    deadlock_timeout is the shorter)."""
    session.execute(text("SET LOCAL deadlock_timeout = '50ms'"))
    session.execute(_move(bench.accounts, 1))
    other: dict[str, int] = {}

    def rival() -> None:
        with bench.engine.begin() as conn:
            conn.execute(text("SET LOCAL deadlock_timeout = '10s'"))
            other["pid"] = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            conn.execute(_move(bench.accounts, 2))
            conn.execute(_move(bench.accounts, 1))  # waits for this task's transaction

    thread = threading.Thread(target=rival)
    thread.start()
    waiting = "SELECT count(*) FROM pg_locks WHERE pid = :pid AND NOT granted"
    _wait(lambda: "pid" in other and _scalar(bench.engine, waiting, pid=other["pid"]), "the rival")
    try:
        session.execute(_move(bench.accounts, 2))
    finally:
        session.info["rival"] = thread  # joined by the test once the attempt rolled back


def serialization_failure(bench: Bench, session: Session) -> None:
    """Under REPEATABLE READ, another transaction updates and commits a row this
    one's snapshot already covers; this one's update of it then fails."""
    session.execute(bench.accounts.select())
    with bench.engine.begin() as conn:
        conn.execute(_move(bench.accounts, 1))
    session.execute(_move(bench.accounts, 1))


def lost_connection(bench: Bench, session: Session) -> None:
    """The connection dies in the middle of the transaction."""
    _terminate(bench.engine, session)
    session.execute(text("SELECT 1"))


def lost_at_commit(bench: Bench, session: Session) -> None:
    """The body succeeds; the connection dies just before the COMMIT is sent
    (``before_commit`` also fires for the release of the guard's savepoint:
    the fault waits for the session's own commit)."""

    def at_commit(s: Session) -> None:
        if not s.in_nested_transaction() and not s.info.get("terminated"):
            s.info["terminated"] = True
            _terminate(bench.engine, s)

    event.listen(session, "before_commit", at_commit)


FAULTS = {
    "deadlock": (deadlock, "40P01", None),
    "serialization-failure": (serialization_failure, "40001", "REPEATABLE READ"),
    "lost-connection": (lost_connection, "disconnect", None),
    "lost-at-commit": (lost_at_commit, "disconnect at COMMIT", None),
}


@pytest.fixture
def app() -> Celery:
    return Celery(unique("app"), broker="memory://")


@pytest.mark.parametrize("fault", list(FAULTS))
def test_c6_real_database_faults_roll_back_and_retry_then_apply_once(
    app: Celery, bench: Bench, fault: str
) -> None:
    """The fault is the server's own (its SQLSTATE, or a dropped connection, is
    seen by the engine); the attempt leaves nothing; the retry applies once."""
    inject, expected, isolation = FAULTS[fault]
    engine = bench.engine
    if isolation:
        engine = engine.execution_options(isolation_level=isolation)
    factory = sessionmaker(engine)
    sessions: list[Session] = []

    @inbox_task(
        bench.inbox,
        session_factory=factory,
        command_id="ref",
        consumer="c",
        name=unique("t"),
        max_retries=3,
        retry_backoff_max=1,
    )
    def apply_ref(ref: str) -> str:
        session = inboxguard.current_session()
        session.execute(bench.ledger.insert().values(ref=ref))
        bench.attempts += 1
        if bench.attempts == 1:
            sessions.append(session)
            inject(bench, session)
        return "done"

    result = apply_ref.apply(args=("r1",))
    for session in sessions:
        rival = session.info.get("rival")
        if rival is not None:
            rival.join(10)

    assert result.state == "SUCCESS", result.traceback
    assert result.get() == "done"
    assert bench.attempts == 2
    assert bench.errors == [expected]  # one real fault, on the first attempt only
    assert count(bench.engine, bench.ledger) == 1  # the failed attempt left nothing
    assert count(bench.engine, bench.inbox.tables.inbox) == 1
    assert bench.inbox.quarantined("c") == []
