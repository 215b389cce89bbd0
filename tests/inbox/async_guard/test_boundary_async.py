"""G9/G10 for the asyncio guard: a commit or rollback inside the block is
refused at its exit, savepoints are allowed, on aiosqlite and asyncpg."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from inboxguard import ConfigurationError

from .conftest import AsyncSetup
from .test_guard_async import count_orders

MISTAKE = "committed or rolled back inside the guarded block"


def run(setup: AsyncSetup, body: Callable[[AsyncEngine], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        engine = setup.engine()
        try:
            return await body(engine)
        finally:
            await engine.dispose()

    return asyncio.run(main())


def test_rollback_inside_the_async_block_is_refused(setup: AsyncSetup) -> None:
    """``await session.rollback()`` then carrying on: refused, nothing commits."""

    async def body(engine: AsyncEngine) -> None:
        async with AsyncSession(engine) as session:
            with pytest.raises(ConfigurationError, match=MISTAKE):
                async with setup.inbox.guard_async(
                    session, consumer="orders", command_id="r1", payload={}
                ):
                    await session.rollback()
                    await session.execute(insert(setup.orders).values(command_id="r1"))
                await session.commit()  # never reached

    run(setup, body)
    assert setup.inbox.lookup("orders", "r1") is None
    assert count_orders(setup) == 0


@pytest.mark.parametrize("end", ["commit", "rollback"])
def test_async_connection_commit_or_rollback_is_refused(setup: AsyncSetup, end: str) -> None:
    """``await conn.commit()`` / ``await conn.rollback()`` on an AsyncConnection."""

    async def body(engine: AsyncEngine) -> None:
        async with engine.connect() as conn:
            with pytest.raises(ConfigurationError, match=MISTAKE):
                async with setup.inbox.guard_async(
                    conn, consumer="orders", command_id=f"c-{end}", payload={}
                ) as entry:
                    await getattr(conn, end)()
                    entry.result = {"stored": True}

    run(setup, body)


def test_savepoints_inside_the_async_block_are_allowed(setup: AsyncSetup) -> None:
    """A savepoint rolled back inside the block leaves the claim in place."""

    async def body(engine: AsyncEngine) -> None:
        async with AsyncSession(engine) as session:
            async with setup.inbox.guard_async(
                session, consumer="orders", command_id="s1", payload={}
            ) as entry:
                await session.execute(insert(setup.orders).values(id=1, command_id="s1"))
                try:
                    async with session.begin_nested():
                        await session.execute(insert(setup.orders).values(id=1, command_id="x"))
                except IntegrityError:
                    pass
                entry.result = {"ok": True}
            await session.commit()

    run(setup, body)
    record = setup.inbox.lookup("orders", "s1")
    assert record is not None
    assert record.result == {"ok": True}
    assert count_orders(setup) == 1
