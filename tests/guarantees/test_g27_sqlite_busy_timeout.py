"""G27: on SQLite the claim bounds its wait with ``lock_timeout`` and puts the
connection's busy timeout back to the caller's value, as the PostgreSQL
claim puts ``lock_timeout`` back: inside the block, after it, and after a
claim that timed out, the caller's pooled connection waits as long as the
caller configured (here 30 s, from ``sqlite3.connect(timeout=30)``).
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest
from sqlalchemy import Connection, create_engine, text
from sqlalchemy.engine import Engine

from inboxguard import Inbox, InProgressError

CALLER_MS = 30_000


@pytest.fixture
def engine(tmp_path: object) -> Iterator[Engine]:
    """A SQLite file whose connections wait 30 s for a lock, one connection in the pool."""
    eng = create_engine(
        f"sqlite:///{tmp_path}/inbox.db",
        connect_args={"timeout": CALLER_MS / 1000},
        pool_size=1,
        max_overflow=0,
    )
    yield eng
    eng.dispose()


@pytest.fixture
def box(engine: Engine) -> Inbox:
    """An inbox whose claims wait at most 100 ms."""
    inbox = Inbox(
        engine, retention=dt.timedelta(days=1), lock_timeout=dt.timedelta(milliseconds=100)
    )
    inbox.create_schema()
    return inbox


Claim = Callable[[Inbox, Connection, str], AbstractContextManager[bool]]


@contextmanager
def _guard(box: Inbox, conn: Connection, command_id: str) -> Iterator[bool]:
    with box.guard(conn, consumer="c", command_id=command_id, payload={}) as entry:
        yield entry.duplicate


@contextmanager
def _batch(box: Inbox, conn: Connection, command_id: str) -> Iterator[bool]:
    commands = [(command_id, {}), (command_id + "-2", {})]
    with box.guard_batch(conn, consumer="c", commands=commands) as batch:
        yield batch[0].duplicate


@pytest.fixture(params=["guard", "guard_batch"])
def claim(request: pytest.FixtureRequest) -> Claim:
    """Each way commands are claimed."""
    return _guard if request.param == "guard" else _batch


def _busy_timeout(conn: Connection) -> int:
    return int(conn.execute(text("PRAGMA busy_timeout")).scalar_one())


def test_fresh_and_duplicate_claims_put_the_callers_busy_timeout_back(
    engine: Engine, box: Inbox, claim: Claim
) -> None:
    for expect_duplicate in (False, True):
        with engine.begin() as conn:
            assert _busy_timeout(conn) == CALLER_MS
            with claim(box, conn, "a") as duplicate:
                assert duplicate is expect_duplicate
                assert _busy_timeout(conn) == CALLER_MS
            assert _busy_timeout(conn) == CALLER_MS
    with engine.connect() as conn:  # the same pooled connection, next checkout
        assert _busy_timeout(conn) == CALLER_MS


def test_a_claim_that_timed_out_puts_the_callers_busy_timeout_back(
    engine: Engine, box: Inbox, claim: Claim, tmp_path: object
) -> None:
    holder = sqlite3.connect(f"{tmp_path}/inbox.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # holds the write lock
    try:
        with pytest.raises(InProgressError):
            with engine.begin() as conn:
                with claim(box, conn, "b"):
                    pass
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with engine.connect() as conn:
        assert _busy_timeout(conn) == CALLER_MS
    with engine.begin() as conn:  # and the command is claimed once the lock is free
        with claim(box, conn, "b") as duplicate:
            assert not duplicate


def test_guard_async_puts_the_callers_busy_timeout_back(tmp_path: object) -> None:
    """The same on aiosqlite: the asyncio guard runs the same claim."""
    import asyncio

    from sqlalchemy.ext.asyncio import create_async_engine

    async def main() -> list[int]:
        engine = create_async_engine(
            f"sqlite+aiosqlite:///{tmp_path}/async.db",
            connect_args={"timeout": CALLER_MS / 1000},
        )
        sync = create_engine(f"sqlite:///{tmp_path}/async.db")
        box = Inbox(
            sync, retention=dt.timedelta(days=1), lock_timeout=dt.timedelta(milliseconds=100)
        )
        box.create_schema()
        seen = []
        try:
            async with engine.connect() as conn, conn.begin():
                async with box.guard_async(conn, consumer="c", command_id="a", payload={}):
                    seen.append(int((await conn.execute(text("PRAGMA busy_timeout"))).scalar_one()))
                seen.append(int((await conn.execute(text("PRAGMA busy_timeout"))).scalar_one()))
        finally:
            await engine.dispose()
            sync.dispose()
        return seen

    assert asyncio.run(main()) == [CALLER_MS, CALLER_MS]
