"""G11: the quarantine record never touches the caller's connection.

A pool that hands out the caller's own connection (``SingletonThreadPool``,
SQLAlchemy's default for an in-memory SQLite database, and ``StaticPool``)
would run the record's "own transaction" on the caller's connection and
commit the caller's pending writes. An exhausted pool would make the guard
wait for the connection the caller holds. In both cases the refusal stands,
the record is logged at ERROR, nothing of the caller's commits, and nothing
waits for the pool.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, insert, select
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session
from sqlalchemy.pool import SingletonThreadPool, StaticPool

from inboxguard import BeyondRetentionError, Inbox, PayloadMismatchError, QuarantineReason
from tests.helpers import business_tables, count, create_business


def _claim(inbox: Inbox, engine: Engine, command_id: str) -> None:
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id=command_id, payload={"n": 1}):
            pass


def _not_written(caplog: pytest.LogCaptureFixture, command_id: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.levelno == logging.ERROR
        and "quarantine record" in r.getMessage()
        and f"'command_id': '{command_id}'" in r.getMessage()
    ]


@pytest.fixture(params=[SingletonThreadPool, StaticPool])
def shared_engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    """An in-memory SQLite engine whose pool hands out the caller's connection."""
    engine = create_engine(
        "sqlite://", poolclass=request.param, connect_args={"check_same_thread": False}
    )
    yield engine
    engine.dispose()


def test_g11_shared_pool_never_commits_the_callers_writes(
    shared_engine: Engine, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A mismatch and a stale message under SingletonThreadPool and StaticPool:
    the refusal is raised, the caller's pending write rolls back with it, and
    the record is logged at ERROR instead of written."""
    inbox = Inbox(shared_engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    accounts, ledger = create_business(shared_engine, prefix)
    _claim(inbox, shared_engine, "m-1")
    old = dt.datetime.now(dt.UTC) - dt.timedelta(days=30)
    cases = [("m-1", {"n": 2}, None, PayloadMismatchError), ("s-1", {}, old, BeyondRetentionError)]
    for command_id, payload, sent_at, error in cases:
        with caplog.at_level(logging.ERROR, logger="inboxguard"):
            with pytest.raises(error), Session(shared_engine) as session, session.begin():
                session.execute(insert(ledger).values(command_id="pending", amount=1))
                with inbox.guard(
                    session, consumer="c", command_id=command_id, payload=payload, sent_at=sent_at
                ):
                    pass
        assert _not_written(caplog, command_id), command_id
    assert count(shared_engine, ledger) == 0
    assert count(shared_engine, accounts) == 1
    assert inbox.quarantined() == []


def test_g11_quarantine_delivery_on_a_shared_pool_returns_false(
    shared_engine: Engine, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``quarantine_delivery()`` on such a pool logs the record and returns False."""
    inbox = Inbox(shared_engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    with caplog.at_level(logging.ERROR, logger="inboxguard"):
        written = inbox.quarantine_delivery(
            consumer="c", command_id="q-1", payload={}, reason=QuarantineReason.RETRIES_EXHAUSTED
        )
    assert written is False
    assert _not_written(caplog, "q-1")


def test_g11_shared_pool_is_named_when_the_inbox_is_built(
    shared_engine: Engine, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Building an inbox on such a pool warns that records will only be logged."""
    with caplog.at_level(logging.WARNING, logger="inboxguard"):
        Inbox(shared_engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    assert any("hands out the caller's own connection" in r.getMessage() for r in caplog.records)


def test_g11_exhausted_pool_still_refuses_at_once(
    db_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """pool_size=1, max_overflow=0, the caller holding the only connection: a
    mismatch raises PayloadMismatchError without waiting for the pool (its
    timeout is 30 s), the record is logged at ERROR, and
    ``quarantine_delivery()`` returns False instead of raising a pool error."""
    engine = create_engine(db_url, pool_size=1, max_overflow=0)
    inbox = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    try:
        _claim(inbox, engine, "e-1")
        started = time.monotonic()
        with caplog.at_level(logging.ERROR, logger="inboxguard"):
            with pytest.raises(PayloadMismatchError), Session(engine) as session, session.begin():
                with inbox.guard(session, consumer="c", command_id="e-1", payload={"n": 2}):
                    pass
            with Session(engine) as session, session.begin():
                session.connection()  # the caller holds the only connection
                written = inbox.quarantine_delivery(
                    consumer="c", command_id="e-2", payload={}, reason="retries_exhausted"
                )
        assert time.monotonic() - started < 5
        assert written is False
        assert _not_written(caplog, "e-1")
        assert _not_written(caplog, "e-2")
        assert inbox.quarantine_delivery(
            consumer="c", command_id="e-3", payload={}, reason="retries_exhausted"
        )
    finally:
        inbox.drop_schema()
        engine.dispose()


def test_g11_async_static_pool_never_commits_the_callers_writes(
    prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """aiosqlite's in-memory default (StaticPool): a mismatch through
    ``guard_async`` leaves the caller's pending write uncommitted."""
    inbox = Inbox(create_engine("sqlite://"), retention=dt.timedelta(days=1), table_prefix=prefix)
    business, _accounts, ledger = business_tables(prefix)

    async def main() -> int:
        engine = create_async_engine("sqlite+aiosqlite://")
        assert isinstance(engine.pool, StaticPool)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(inbox.tables.metadata.create_all)
                await conn.run_sync(business.create_all)
            async with AsyncSession(engine) as session:
                async with inbox.guard_async(session, consumer="c", command_id="a-1", payload=1):
                    pass
                await session.commit()
            async with AsyncSession(engine) as session:
                await session.execute(insert(ledger).values(command_id="pending", amount=1))
                with pytest.raises(PayloadMismatchError):
                    async with inbox.guard_async(
                        session, consumer="c", command_id="a-1", payload=2
                    ):
                        pass
                await session.rollback()
            async with engine.connect() as conn:
                return len((await conn.execute(select(ledger))).all())
        finally:
            await engine.dispose()

    with caplog.at_level(logging.ERROR, logger="inboxguard"):
        assert asyncio.run(main()) == 0
    assert _not_written(caplog, "a-1")
