"""The claim on the asyncio drivers' adapted DBAPI cursor (asyncpg and
psycopg's asyncio mode): taken only when nothing would notice, and the same
as ``AsyncConnection.execute`` in every outcome.

Each test drives its coroutine with ``asyncio.run`` and creates (and disposes
of) its ``AsyncEngine`` inside it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

import inboxguard
from inboxguard.sql import direct
from tests.conftest import unique

CONSUMER = "billing"
DRIVERS = ["asyncpg", "psycopg"]
T = TypeVar("T")


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@pytest.fixture
def box(pg_url: str) -> Iterator[inboxguard.Inbox]:
    engine = create_engine(pg_url)
    inbox = inboxguard.Inbox(
        engine,
        retention=dt.timedelta(days=1),
        table_prefix=unique("dra_"),
        lock_timeout=dt.timedelta(milliseconds=200),
    )
    inbox.create_schema()
    yield inbox
    inbox.drop_schema()
    engine.dispose()


def _engine(pg_url: str, driver: str, *, traced: bool = False) -> AsyncEngine:
    engine = create_async_engine(pg_url.replace("+psycopg", f"+{driver}"))
    if traced:
        event.listen(engine.sync_engine, "before_cursor_execute", lambda *_a: None)
    return engine


@pytest.fixture
def direct_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SQL of every statement the direct path ran, in order."""
    ran: list[str] = []
    run = direct._run

    def counting(conn: Any, form: Any, params: Any) -> Any:
        ran.append(form.sql)
        return run(conn, form, params)

    monkeypatch.setattr(direct, "_run", counting)
    return ran


async def _play(box: inboxguard.Inbox, engine: AsyncEngine, cid: str) -> list[Any]:
    """Fresh with a result, duplicate with it, mismatch: what the caller saw."""
    seen: list[Any] = []
    async with engine.begin() as conn:
        async with box.guard_async(conn, consumer=CONSUMER, command_id=cid, payload={"a": 1}) as e:
            seen.append(e.duplicate)
            e.result = {"ok": True}
    async with engine.begin() as conn:
        async with box.guard_async(conn, consumer=CONSUMER, command_id=cid, payload={"a": 1}) as e:
            seen.extend([e.duplicate, e.result])
    with pytest.raises(inboxguard.PayloadMismatchError):
        async with engine.begin() as conn:
            async with box.guard_async(conn, consumer=CONSUMER, command_id=cid, payload={"a": 2}):
                pytest.fail("a mismatch never runs the block")
    return seen


@pytest.mark.parametrize("driver", DRIVERS)
def test_outcomes_are_the_same_on_both_paths(
    box: inboxguard.Inbox, pg_url: str, driver: str, direct_runs: list[str]
) -> None:
    """Fresh, duplicate with its stored result, and mismatch: the same entries,
    the same stored row and quarantine whichever path ran the statements. The
    plain engine ran the claims and the result store on the cursor; a tracer
    on the engine saw every one instead."""

    async def both() -> dict[str, list[Any]]:
        outcomes: dict[str, list[Any]] = {}
        for label, traced in (("direct", False), ("sqlalchemy", True)):
            engine = _engine(pg_url, driver, traced=traced)
            try:
                before = len(direct_runs)
                outcomes[label] = await _play(box, engine, f"same-{driver}-{label}")
                outcomes[label].append(len(direct_runs) - before)
            finally:
                await engine.dispose()
        return outcomes

    outcomes = _run(both())
    for label in ("direct", "sqlalchemy"):
        record = box.lookup(CONSUMER, f"same-{driver}-{label}")
        assert record is not None
        assert record.result == {"ok": True}
        reasons = [r.reason for r in box.quarantined() if r.command_id.endswith(label)]
        assert reasons == ["payload_mismatch"]
    assert outcomes["direct"][:3] == outcomes["sqlalchemy"][:3] == [False, True, {"ok": True}]
    # Three claims and one result store on the cursor; none under the tracer.
    assert outcomes["direct"][3] == 4
    assert outcomes["sqlalchemy"][3] == 0


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_held_claim_times_out_as_in_progress_and_restores_lock_timeout(
    box: inboxguard.Inbox, pg_url: str, driver: str, direct_runs: list[str]
) -> None:
    """A second consumer on a claim held by an open transaction waits at most
    ``lock_timeout`` on the direct path, raises InProgressError, and a
    transaction's own lock_timeout is kept across a claim."""

    async def race() -> str:
        engine = _engine(pg_url, driver)
        try:
            held = asyncio.Event()
            release = asyncio.Event()

            async def holder() -> None:
                async with engine.begin() as conn:
                    async with box.guard_async(
                        conn, consumer=CONSUMER, command_id="held", payload={}
                    ):
                        held.set()
                        await asyncio.wait_for(release.wait(), 10)

            task = asyncio.create_task(holder())
            await asyncio.wait_for(held.wait(), 10)
            try:
                with pytest.raises(inboxguard.InProgressError):
                    async with engine.begin() as conn:
                        async with box.guard_async(
                            conn, consumer=CONSUMER, command_id="held", payload={}
                        ):
                            pytest.fail("a held claim never runs the block")
            finally:
                release.set()
                await task
            async with engine.begin() as conn:
                await conn.execute(text("SET LOCAL lock_timeout = '7s'"))
                async with box.guard_async(conn, consumer=CONSUMER, command_id="next", payload={}):
                    return str((await conn.execute(text("SHOW lock_timeout"))).scalar())
        finally:
            await engine.dispose()

    assert _run(race()) == "7s"
    assert len(direct_runs) == 3  # the holder's, the refused and the next claim
    assert box.lookup(CONSUMER, "held") is not None


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_lost_connection_is_invalidated_and_raised_as_sqlalchemy_would(
    box: inboxguard.Inbox, pg_url: str, driver: str
) -> None:
    """The consumer's backend killed before the claim: SQLAlchemy's
    ``DBAPIError`` marked as a disconnect (``OperationalError`` on psycopg;
    asyncpg's adapter raises the generic class, through ``execute`` too), the
    block never runs, the connection is invalidated and nothing is recorded."""
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")

    async def lose() -> tuple[bool, bool]:
        engine = _engine(pg_url, driver)
        try:
            async with engine.connect() as conn:
                pid = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
                await conn.commit()
                with admin.connect() as other:
                    other.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
                with pytest.raises(DBAPIError) as raised:
                    async with conn.begin():
                        async with box.guard_async(
                            conn, consumer=CONSUMER, command_id="lost", payload={}
                        ):
                            pytest.fail("the block never runs without a claim")
                return raised.value.connection_invalidated, conn.invalidated
        finally:
            await engine.dispose()

    try:
        assert _run(lose()) == (True, True)
    finally:
        admin.dispose()
    assert box.lookup(CONSUMER, "lost") is None
