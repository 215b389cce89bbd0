"""A11-A12 and BT18: the asyncio guards own their part of the caller's transaction.

A cancelled block (what ``asyncio.wait_for`` does on its timeout) and an error the caller
catches outside the block leave no claim and nothing of the block, even when
the caller commits; a commit inside the block is refused before it runs; a
cancelled ``guard_batch_async`` commits no entry as claimed. On aiosqlite and
asyncpg.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from inboxguard import BatchCommand, ConfigurationError

from .conftest import AsyncSetup
from .test_boundary_async import run
from .test_guard_async import count_orders


@pytest.mark.parametrize("exit_by", ["timeout", "error"])
def test_a11_cancelled_or_failed_block_caught_outside_leaves_nothing(
    setup: AsyncSetup, exit_by: str
) -> None:
    """The block writes, then is cancelled by ``wait_for`` (or raises); the
    caller catches ``TimeoutError`` outside the block and commits. No claim,
    no order; the redelivery applies the command once."""

    started = asyncio.Event()

    async def handler(session: AsyncSession) -> None:
        async with setup.inbox.guard_async(
            session, consumer="orders", command_id="a11", payload={}
        ):
            await session.execute(insert(setup.orders).values(command_id="a11"))
            if exit_by == "error":
                raise RuntimeError("handler failed")
            started.set()
            await asyncio.sleep(3600)  # cancelled, as wait_for cancels on its timeout

    async def body(engine: AsyncEngine) -> None:
        async with AsyncSession(engine) as session:
            async with session.begin():
                task = asyncio.ensure_future(handler(session))
                if exit_by == "timeout":
                    await started.wait()
                    task.cancel()
                with contextlib.suppress(asyncio.CancelledError, RuntimeError):
                    await task  # the error is logged; the caller goes on and commits
        assert setup.inbox.lookup("orders", "a11") is None
        assert count_orders(setup) == 0
        async with AsyncSession(engine) as session, session.begin():
            async with setup.inbox.guard_async(
                session, consumer="orders", command_id="a11", payload={}
            ) as entry:
                assert not entry.duplicate
                await session.execute(insert(setup.orders).values(command_id="a11"))

    run(setup, body)
    assert count_orders(setup) == 1


@pytest.mark.parametrize("route", ["session.commit()", "connection.commit()", "COMMIT"])
def test_a12_a_commit_inside_the_async_block_is_refused_before_it_runs(
    setup: AsyncSetup, route: str
) -> None:
    """The handler commits by ``route`` after one write, catches the refusal and
    carries on: the exit fails, and nothing commits (not the claim, not the
    write before the commit, not the one after)."""

    async def commit(session: AsyncSession) -> Any:
        if route == "session.commit()":
            return await session.commit()
        if route == "connection.commit()":
            return await (await session.connection()).commit()
        return await session.execute(text("COMMIT"))

    async def body(engine: AsyncEngine) -> None:
        async with AsyncSession(engine) as session:
            with pytest.raises(ConfigurationError, match="inside the guarded block"):
                async with session.begin():
                    async with setup.inbox.guard_async(
                        session, consumer="orders", command_id="a12", payload={}
                    ):
                        await session.execute(insert(setup.orders).values(command_id="a12"))
                        with pytest.raises(ConfigurationError, match="refused"):
                            await commit(session)
                        await session.execute(insert(setup.orders).values(command_id="a12"))

    run(setup, body)
    assert setup.inbox.lookup("orders", "a12") is None
    assert count_orders(setup) == 0


def test_bt18_cancelled_batch_commits_no_entry_as_claimed(setup: AsyncSetup) -> None:
    """``guard_batch_async`` is cancelled while its block handles the first of
    three entries; the caller catches the timeout and commits. None of the
    three is claimed, so every redelivery applies."""

    started = asyncio.Event()

    async def handler(session: AsyncSession) -> None:
        commands = [BatchCommand(f"b{i}", {"i": i}) for i in range(3)]
        async with setup.inbox.guard_batch_async(
            session, consumer="orders", commands=commands
        ) as batch:
            for entry in batch:
                await session.execute(insert(setup.orders).values(command_id=entry.command_id))
                started.set()
                await asyncio.sleep(3600)  # cancelled while handling the first

    async def body(engine: AsyncEngine) -> None:
        async with AsyncSession(engine) as session:
            async with session.begin():
                task = asyncio.ensure_future(handler(session))
                await started.wait()
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    run(setup, body)
    assert [setup.inbox.lookup("orders", f"b{i}") for i in range(3)] == [None, None, None]
    assert count_orders(setup) == 0
