"""BT12, BT15: guard_batch_async keeps guard_batch's decisions and fault points on
aiosqlite and asyncpg."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

import inboxguard
from inboxguard import BatchCommand, ConfigurationError, InProgressError, PayloadMismatchError
from inboxguard.testing import Crash, FaultPoint, crash_at

from .conftest import AsyncSetup
from .test_guard_async import count_orders, run


async def _deliver(setup: AsyncSetup, session: AsyncSession, commands: Any) -> list[str]:
    async with setup.inbox.guard_batch_async(
        session, consumer="orders", commands=commands
    ) as batch:
        for entry in batch.fresh:
            assert inboxguard.current_session() is session
            await session.execute(insert(setup.orders).values(command_id=entry.command_id))
            entry.result = {"order": entry.command_id}
    await session.commit()
    return [e.outcome for e in batch]


def test_bt12_async_batch_mix_results_and_quarantine(setup: AsyncSetup) -> None:
    """Fresh, duplicate (stored result), mismatch (quarantined, survives the
    rollback of a failing block), beyond-horizon, in input order."""
    old = setup.inbox.clock() - dt.timedelta(days=400)

    async def body(engine: AsyncEngine) -> list[Any]:
        sessions = async_sessionmaker(engine)
        seen: list[Any] = []
        async with sessions() as session:
            seen.append(await _deliver(setup, session, [("a", {"n": 1}), ("b", {"n": 1})]))
        async with sessions() as session:
            commands = [
                ("c", {"n": 1}),
                ("a", {"n": 1}),
                ("b", {"n": 2}),
                BatchCommand("d", {}, sent_at=old),
            ]
            seen.append(await _deliver(setup, session, commands))
        async with sessions() as session:
            with pytest.raises(RuntimeError):
                async with setup.inbox.guard_batch_async(
                    session, consumer="orders", commands=[("e", {}), ("a", {"n": 9})]
                ) as batch:
                    assert isinstance(batch[1].error, PayloadMismatchError)
                    raise RuntimeError("handler failed")
            await session.rollback()
        async with sessions() as session:
            async with setup.inbox.guard_batch_async(
                session, consumer="orders", commands={"a": {"n": 1}}
            ) as batch:
                seen.append(batch[0].result)
        return seen

    seen = run(setup, body)
    assert seen == [
        ["fresh", "fresh"],
        ["fresh", "duplicate", "refused", "refused"],
        {"order": "a"},
    ]
    assert count_orders(setup) == 3
    assert setup.inbox.lookup("orders", "e") is None
    reasons = sorted((r.command_id, r.reason) for r in setup.inbox.quarantined())
    assert reasons == [
        ("a", "payload_mismatch"),
        ("b", "payload_mismatch"),
        ("d", "beyond_retention"),
    ]


def test_bt12_async_misuse_and_lock_timeout(setup: AsyncSetup) -> None:
    """A sync Session is refused with the fix named; AUTOCOMMIT is refused;
    a held command refuses the batch as in progress; nothing is written."""

    async def body(engine: AsyncEngine) -> None:
        with pytest.raises(ConfigurationError, match="guard_batch"):
            async with setup.inbox.guard_batch_async(object(), consumer="o", commands=[]):  # type: ignore[arg-type]
                pytest.fail("the block must not run")
        auto = create_async_engine(setup.aurl, isolation_level="AUTOCOMMIT")
        try:
            async with auto.connect() as conn:
                with pytest.raises(ConfigurationError, match="AUTOCOMMIT"):
                    async with setup.inbox.guard_batch_async(
                        conn, consumer="o", commands=[("x", {})]
                    ):
                        pytest.fail("the block must not run")
        finally:
            await auto.dispose()
        sessions = async_sessionmaker(engine)
        async with sessions() as holder:
            async with setup.inbox.guard_async(holder, consumer="o", command_id="held", payload={}):
                pass
            async with sessions() as session:
                with pytest.raises(InProgressError):
                    async with setup.inbox.guard_batch_async(
                        session, consumer="o", commands=[("free", {}), ("held", {})]
                    ):
                        pytest.fail("the block must not run")
                await session.rollback()
            await holder.rollback()

    run(setup, body)
    assert setup.inbox.lookup("o", "free") is None
    assert setup.inbox.lookup("o", "x") is None


def test_bt15_async_crashes_at_the_batch_points_commit_nothing(setup: AsyncSetup) -> None:
    """A crash at ``handler_runs`` for one fresh entry (the block never runs)
    or at ``before_commit`` (after the block and its results) commits no
    claim and no order; the redelivery then applies each command once."""
    commands = [("a", {}), ("b", {}), ("c", {})]

    async def body(engine: AsyncEngine) -> list[Any]:
        sessions = async_sessionmaker(engine)
        seen: list[Any] = []
        for point, key in [(FaultPoint.HANDLER_RUNS, "b"), (FaultPoint.BEFORE_COMMIT, None)]:
            with crash_at(point, key=key) as tap, pytest.raises(Crash) as crash:
                async with sessions() as session:
                    await _deliver(setup, session, commands)
            seen.append((crash.value.point, crash.value.key, dict(tap.runs)))
            seen.append(count_orders(setup))
        async with sessions() as session:
            seen.append(await _deliver(setup, session, commands))
        return seen

    seen = run(setup, body)
    assert seen == [
        (FaultPoint.HANDLER_RUNS, "b", {"a": 1, "b": 1}),
        0,
        (FaultPoint.BEFORE_COMMIT, "a", {"a": 1, "b": 1, "c": 1}),
        0,
        ["fresh", "fresh", "fresh"],
    ]
    assert count_orders(setup) == 3
    assert [setup.inbox.lookup("orders", k).result for k in "abc"] == [  # type: ignore[union-attr]
        {"order": k} for k in "abc"
    ]
