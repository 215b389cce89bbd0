"""The async guard keeps the sync guard's guarantees on aiosqlite and asyncpg.

Each test drives its coroutine with ``asyncio.run`` and creates (and disposes
of) its AsyncEngine inside that loop.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

import inboxguard
from inboxguard import (
    BeyondRetentionError,
    ConfigurationError,
    InProgressError,
    PayloadMismatchError,
    QuarantineReason,
)

from .conftest import AsyncSetup


def run(setup: AsyncSetup, body: Callable[[AsyncEngine], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        engine = setup.engine()
        try:
            return await body(engine)
        finally:
            await engine.dispose()

    return asyncio.run(main())


def count_orders(setup: AsyncSetup) -> int:
    with setup.inbox.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(setup.orders)).scalar_one())


async def place(setup: AsyncSetup, session: AsyncSession, command_id: str, **kw: Any) -> Any:
    """One delivery: guard, insert an order when fresh, commit."""
    async with setup.inbox.guard_async(
        session, consumer="orders", command_id=command_id, payload=kw.pop("payload", {}), **kw
    ) as entry:
        if not entry.duplicate:
            assert inboxguard.current_session() is session
            await session.execute(insert(setup.orders).values(command_id=command_id))
            entry.result = {"order": command_id}
    await session.commit()
    return entry


def test_fresh_then_duplicate_mutates_once(setup: AsyncSetup) -> None:
    async def body(engine: AsyncEngine) -> tuple[Any, Any]:
        sessions = async_sessionmaker(engine)
        async with sessions() as s:
            first = await place(setup, s, "c1", payload={"qty": 2})
        async with sessions() as s:
            second = await place(setup, s, "c1", payload={"qty": 2})
        return first, second

    first, second = run(setup, body)
    assert not first.duplicate
    assert second.duplicate
    assert second.result == {"order": "c1"}
    assert count_orders(setup) == 1
    record = setup.inbox.lookup("orders", "c1")
    assert record is not None
    assert record.result == {"order": "c1"}


def test_mismatch_is_quarantined_and_block_never_runs(setup: AsyncSetup) -> None:
    async def body(engine: AsyncEngine) -> None:
        sessions = async_sessionmaker(engine)
        async with sessions() as s:
            await place(setup, s, "c1", payload={"qty": 2})
        async with sessions() as s:
            with pytest.raises(PayloadMismatchError):
                await place(setup, s, "c1", payload={"qty": 3}, details={"hdr": "x"})
            await s.rollback()

    run(setup, body)
    assert count_orders(setup) == 1
    [record] = setup.inbox.quarantined("orders")
    assert record.reason == QuarantineReason.PAYLOAD_MISMATCH
    assert record.details == {"hdr": "x"}
    assert record.stored_digest == inboxguard.digest_of({"qty": 2})


def test_rollback_leaves_no_evidence_and_redelivery_runs(setup: AsyncSetup) -> None:
    async def body(engine: AsyncEngine) -> Any:
        sessions = async_sessionmaker(engine)
        async with sessions() as s:

            async def failing() -> None:
                async with setup.inbox.guard_async(
                    s, consumer="orders", command_id="c1", payload={}
                ):
                    await s.execute(insert(setup.orders).values(command_id="c1"))
                    raise RuntimeError("boom")

            with pytest.raises(RuntimeError, match="boom"):
                await failing()
            await s.rollback()
        assert setup.inbox.lookup("orders", "c1") is None
        async with sessions() as s:
            return await place(setup, s, "c1")

    again = run(setup, body)
    assert not again.duplicate
    assert count_orders(setup) == 1


def test_race_on_separate_connections_mutates_once(setup: AsyncSetup) -> None:
    """The loser waits past lock_timeout (InProgressError), then finds a duplicate."""

    async def body(engine: AsyncEngine) -> tuple[list[str], Any]:
        sessions = async_sessionmaker(engine)
        claimed = asyncio.Event()
        release = asyncio.Event()
        outcomes: list[str] = []

        async def winner() -> None:
            async with sessions() as s:
                async with setup.inbox.guard_async(
                    s, consumer="orders", command_id="c1", payload={}
                ) as entry:
                    assert not entry.duplicate
                    await s.execute(insert(setup.orders).values(command_id="c1"))
                    claimed.set()
                    await release.wait()
                await s.commit()
                outcomes.append("committed")

        async def loser() -> None:
            await claimed.wait()
            async with sessions() as s:
                try:
                    await place(setup, s, "c1")
                    outcomes.append("ran")
                except InProgressError:
                    await s.rollback()
                    outcomes.append("busy")
            release.set()

        await asyncio.gather(winner(), loser())
        async with sessions() as s:
            retried = await place(setup, s, "c1")
        return outcomes, retried

    outcomes, retried = run(setup, body)
    assert sorted(outcomes) == ["busy", "committed"]
    assert retried.duplicate
    assert count_orders(setup) == 1


def test_stale_sent_at_is_quarantined_without_claiming(setup: AsyncSetup) -> None:
    old = setup.inbox.clock() - dt.timedelta(days=31)

    async def body(engine: AsyncEngine) -> None:
        async with async_sessionmaker(engine)() as s:
            with pytest.raises(BeyondRetentionError):
                await place(setup, s, "c1", sent_at=old, details={"body": [1]})
            await s.rollback()

    run(setup, body)
    assert setup.inbox.lookup("orders", "c1") is None
    assert count_orders(setup) == 0
    [record] = setup.inbox.quarantined("orders")
    assert record.reason == QuarantineReason.BEYOND_RETENTION
    assert record.details == {"body": [1]}


def test_handler_async_runs_once_and_returns_the_stored_result(setup: AsyncSetup) -> None:
    calls: list[str] = []

    @setup.inbox.handler_async(consumer="orders", command_id="order_id")
    async def ship(session: AsyncSession, order_id: str, qty: int) -> dict[str, int]:
        calls.append(order_id)
        assert inboxguard.current_session() is session
        await session.execute(insert(setup.orders).values(command_id=order_id))
        return {"shipped": qty}

    async def body(engine: AsyncEngine) -> list[Any]:
        results = []
        for _ in range(2):
            async with async_sessionmaker(engine)() as s, s.begin():
                results.append(await ship(s, "o1", qty=4))
        return results

    assert run(setup, body) == [{"shipped": 4}, {"shipped": 4}]
    assert calls == ["o1"]
    assert count_orders(setup) == 1


def test_async_connection_works_like_a_session(setup: AsyncSetup) -> None:
    async def body(engine: AsyncEngine) -> bool:
        async with (
            engine.begin() as conn,
            setup.inbox.guard_async(conn, consumer="orders", command_id="c9", payload=[1]) as entry,
        ):
            assert inboxguard.current_session() is conn
            await conn.execute(insert(setup.orders).values(command_id="c9"))
        return entry.duplicate

    assert run(setup, body) is False
    assert setup.inbox.lookup("orders", "c9") is not None


def test_wrong_session_types_get_a_clear_error(setup: AsyncSetup) -> None:
    async def body(engine: AsyncEngine) -> None:
        with (
            setup.inbox.engine.connect() as sync_conn,
            pytest.raises(ConfigurationError, match="use guard\\(\\)"),
        ):
            async with setup.inbox.guard_async(
                sync_conn,  # type: ignore[arg-type]
                consumer="orders",
                command_id="c1",
                payload={},
            ):
                pass
        auto = engine.execution_options(isolation_level="AUTOCOMMIT")
        async with auto.connect() as conn:
            with pytest.raises(ConfigurationError, match="AUTOCOMMIT"):
                async with setup.inbox.guard_async(
                    conn, consumer="orders", command_id="c1", payload={}
                ):
                    pass

    run(setup, body)
    assert setup.inbox.lookup("orders", "c1") is None


def test_inbox_refuses_an_async_engine_with_a_hint(setup: AsyncSetup) -> None:
    async def body(engine: AsyncEngine) -> None:
        with pytest.raises(ConfigurationError, match="pass a sync Engine"):
            inboxguard.Inbox(engine, retention=dt.timedelta(days=1))  # type: ignore[arg-type]

    run(setup, body)


def test_quarantine_records_of_async_reads_what_the_sync_lookup_reads(setup: AsyncSetup) -> None:
    """The async adapters' lookup through an AsyncEngine returns the same
    records, any status, of the one command only."""
    box = setup.inbox
    for command_id in ("q-1", "q-2"):
        assert box.quarantine_delivery(
            consumer="orders", command_id=command_id, payload={"n": 1}, reason="invalid_command"
        )
    first = box.quarantine_records_of("orders", "q-1")[0]
    assert box.resolve_quarantine(first.id)

    async def body(engine: AsyncEngine) -> Any:
        return (
            await box.quarantine_records_of_async(engine, "orders", "q-1"),
            await box.quarantine_records_of_async(engine, "orders", "absent"),
        )

    found, absent = run(setup, body)
    assert found == box.quarantine_records_of("orders", "q-1")
    assert [(r.command_id, r.status) for r in found] == [("q-1", "resolved")]
    assert absent == []
