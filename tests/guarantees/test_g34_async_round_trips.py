"""G34: on asyncpg and psycopg's asyncio connection, the guard's savepoint
rides with the BEGIN and its release with the COMMIT, and the exit is still
checked by the database.

The round trips are read on the driver connection itself
(:mod:`tests.adapters.async_wire`): psycopg's through libpq's trace, as in
G32; asyncpg's as the calls of its protocol's coroutines, each of which
ends in the server's ``ReadyForQuery``, so one recorded call is one round
trip, whichever layer sent it. Statements sent as one query are joined by ``" + "``. Each check of
the exit also asserts the rows and the redelivery. Every test drives its
coroutine with ``asyncio.run`` on an engine of one connection made inside that
loop.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Connection, Table, create_engine, event, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, create_async_engine

from inboxguard import ConfigurationError, Inbox
from tests.adapters.async_wire import traced
from tests.helpers import count, create_business

pytestmark = pytest.mark.postgresql

RETENTION = dt.timedelta(days=7)


@dataclass
class World:
    """The inbox and the business tables (made through the sync engine) and
    the asyncpg URL of the same database."""

    box: Inbox
    engine: Engine
    accounts: Table
    ledger: Table
    aurl: str
    prefix: str
    driver: str

    def run(self, body: Callable[[AsyncEngine], Awaitable[Any]]) -> Any:
        """Run ``body`` on an engine of one asyncpg connection, in a loop of its own."""

        async def main() -> Any:
            engine = create_async_engine(self.aurl, pool_size=1, max_overflow=0)
            try:
                return await body(engine)
            finally:
                await engine.dispose()

        return asyncio.run(main())

    def balance(self) -> int:
        with self.engine.connect() as conn:
            query = select(self.accounts.c.balance).where(self.accounts.c.id == 0)
            return int(conn.execute(query).scalar_one())

    def kinds(self, wire: Any) -> list[str]:
        return [k.split(" SET ")[0] for k in wire.kinds(self.prefix, f"{self.prefix}ledger")]


@pytest.fixture(params=["asyncpg", "psycopg"])
def world(request: pytest.FixtureRequest, pg_url: str, prefix: str) -> Iterator[World]:
    """Each asyncio driver in turn (``postgresql+psycopg`` through
    ``create_async_engine`` is psycopg's ``AsyncConnection``)."""
    engine = create_engine(pg_url)
    box = Inbox(engine, retention=RETENTION, table_prefix=prefix)
    box.create_schema()
    accounts, ledger = create_business(engine, prefix)
    aurl = pg_url.replace("postgresql+psycopg://", f"postgresql+{request.param}://")
    yield World(box, engine, accounts, ledger, aurl, prefix, request.param)
    box.drop_schema()
    accounts.metadata.drop_all(engine)
    engine.dispose()


async def _apply(w: World, conn: AsyncConnection | AsyncSession, cid: str) -> None:
    """The business mutation: one UPDATE and one INSERT."""
    accounts = w.accounts
    update = accounts.update().where(accounts.c.id == 0)
    await conn.execute(update.values(balance=accounts.c.balance + 10))
    await conn.execute(w.ledger.insert().values(command_id=cid, amount=10))


async def _deliver(w: World, engine: AsyncEngine, cid: str, kind: str = "connection") -> bool:
    """One delivery that behaves; True when it applied."""
    if kind == "session":
        async with AsyncSession(engine) as session, session.begin():
            async with w.box.guard_async(session, consumer="c", command_id=cid, payload={}) as e:
                if not e.duplicate:
                    await _apply(w, session, cid)
        return not e.duplicate
    async with engine.connect() as conn, conn.begin():
        async with w.box.guard_async(conn, consumer="c", command_id=cid, payload={}) as e:
            if not e.duplicate:
                await _apply(w, conn, cid)
    return not e.duplicate


async def _driver(conn: AsyncConnection) -> Any:
    """The asyncpg connection under ``conn``."""
    return (await conn.get_raw_connection()).driver_connection


@pytest.mark.parametrize("kind", ["connection", "session"])
def test_g34_the_savepoint_costs_no_round_trip_of_its_own(world: World, kind: str) -> None:
    """A fresh delivery sends the BEGIN with the savepoint and the release
    with the COMMIT: five round trips, where a bare one with the same body
    makes four (BEGIN, UPDATE, INSERT, COMMIT) and the guard made seven; a
    duplicate three, without the body."""

    async def body(engine: AsyncEngine) -> tuple[list[str], list[str], bool, bool]:
        await _deliver(world, engine, "warm", kind)
        async with traced(engine) as fresh:
            applied = await _deliver(world, engine, "a", kind)
        async with traced(engine) as again:
            repeated = await _deliver(world, engine, "a", kind)
        return world.kinds(fresh), world.kinds(again), applied, repeated

    fresh, again, applied, repeated = world.run(body)
    assert applied
    assert not repeated
    assert fresh == [
        "BEGIN + savepoint",
        "claim",
        f"UPDATE {world.prefix}accounts",
        "body INSERT",
        "release + COMMIT",
    ], fresh
    assert again == ["BEGIN + savepoint", "claim", "release + COMMIT"], again
    assert world.balance() == 20


@pytest.mark.parametrize("listened", ["before_cursor_execute", "do_execute"])
def test_g34_a_statement_listener_sees_every_statement_sent_alone(
    world: World, listened: str
) -> None:
    """With a SQLAlchemy statement listener on the engine (a tracer), or a
    listener of the dialect's ``do_execute``, the savepoint and the release
    are sent as SQLAlchemy sends them, so the listener sees each; the
    delivery applies once all the same."""
    seen: list[str] = []

    async def body(engine: AsyncEngine) -> list[str]:
        statement = 2 if listened == "before_cursor_execute" else 1  # its argument's place
        event.listen(engine.sync_engine, listened, lambda *a: seen.append(a[statement]))
        await _deliver(world, engine, "warm")
        async with traced(engine) as wire:
            assert await _deliver(world, engine, "a")
        assert not await _deliver(world, engine, "a")
        return world.kinds(wire)

    kinds = world.run(body)
    assert kinds[:3] == ["BEGIN", "savepoint", "claim"], kinds
    assert kinds[-2:] == ["release", "COMMIT"], kinds
    assert any(s.startswith("SAVEPOINT") for s in seen)
    assert any(s.startswith("RELEASE SAVEPOINT") for s in seen)
    assert world.balance() == 20


def test_g34_work_before_the_guard_and_a_second_guard(world: World) -> None:
    """The caller wrote before the guard: asyncpg's own BEGIN went with that
    write, so the savepoint goes alone. A second guard in the same
    transaction sends the first one's release before its own savepoint, and
    its own release with the COMMIT. Both commands apply, once, and the
    connection's next transaction begins as asyncpg begins one."""

    async def both(engine: AsyncEngine, first: str, second: str) -> None:
        async with engine.connect() as conn:
            async with conn.begin():
                await conn.execute(world.ledger.insert().values(command_id="first", amount=0))
                for cid in (first, second):
                    async with world.box.guard_async(
                        conn, consumer="c", command_id=cid, payload={}
                    ) as e:
                        assert not e.duplicate
                        await _apply(world, conn, cid)
            async with conn.begin():  # a bare transaction after it, on the same connection
                await conn.execute(world.ledger.insert().values(command_id="next", amount=0))

    async def body(engine: AsyncEngine) -> list[str]:
        await both(engine, "warm a", "warm b")  # each statement prepared once on the connection
        async with traced(engine) as wire:
            await both(engine, "a", "b")
        assert not await _deliver(world, engine, "a")
        assert not await _deliver(world, engine, "b")
        return world.kinds(wire)

    kinds = world.run(body)
    guarded = ["claim", f"UPDATE {world.prefix}accounts", "body INSERT"]
    assert kinds == [
        "BEGIN",
        "body INSERT",
        "savepoint",
        *guarded,
        "release",  # the first guard's, before the second savepoint
        "savepoint",
        *guarded,
        "release + COMMIT",
        "BEGIN",
        "body INSERT",
        "COMMIT",
    ], kinds
    assert count(world.engine, world.ledger) == 2 * 4  # first, a, b, next: twice
    assert world.balance() == 40


def test_g34_a_release_kept_for_the_commit_fails_it_when_the_savepoint_is_gone(
    world: World,
) -> None:
    """The release kept back for the COMMIT is the database's word: when the
    guard's savepoint is gone by the time the caller commits (here a
    ``RELEASE`` sent on the asyncpg connection after the block, then a
    write), the commit fails with the guard's error, the server never runs
    the ``COMMIT``, and nothing of the transaction is kept."""
    statement = f"INSERT INTO {world.prefix}ledger (command_id, amount) VALUES ('late', 1)"

    async def body(engine: AsyncEngine) -> list[str]:
        await _deliver(world, engine, "warm")
        async with traced(engine) as wire:
            with pytest.raises(ConfigurationError, match="inside the guarded block"):
                async with engine.connect() as conn, conn.begin():
                    async with world.box.guard_async(
                        conn, consumer="c", command_id="k", payload={}
                    ):
                        await _apply(world, conn, "k")
                    driver = await _driver(conn)
                    await driver.execute("RELEASE SAVEPOINT sa_savepoint_1")
                    await driver.execute(statement)
        assert await _deliver(world, engine, "k")
        return world.kinds(wire)

    kinds = world.run(body)
    assert kinds[-2:] == ["release + COMMIT", "ROLLBACK"], kinds
    assert world.box.lookup("c", "k") is not None
    assert count(world.engine, world.ledger) == 2  # warm and the redelivery: no 'late'
    assert world.balance() == 20


def test_g34_a_failed_statement_caught_in_the_block_fails_the_commit(world: World) -> None:
    """A statement fails inside the block and the handler catches the error:
    the transaction is failed, which asyncpg does not tell from an open one,
    so the release is kept for the commit; there the server refuses it and
    skips the ``COMMIT``, the transaction is rolled back and the commit
    raises the guard's error. psycopg reports the failed transaction, so
    the guard refuses it at its exit without sending the release, and rolls
    back. Nothing commits; the redelivery applies once."""

    async def body(engine: AsyncEngine) -> list[str]:
        await _deliver(world, engine, "warm")
        async with traced(engine) as wire:
            with pytest.raises(ConfigurationError, match="inside the guarded block"):
                async with engine.connect() as conn, conn.begin():
                    async with world.box.guard_async(
                        conn, consumer="c", command_id="f", payload={}
                    ):
                        await _apply(world, conn, "f")
                        with pytest.raises(Exception, match="division by zero"):
                            await conn.execute(text("SELECT 1 / 0"))
        assert await _deliver(world, engine, "f")
        assert not await _deliver(world, engine, "f")
        return world.kinds(wire)

    kinds = world.run(body)
    after = ["release + COMMIT", "ROLLBACK"] if world.driver == "asyncpg" else ["ROLLBACK"]
    assert kinds[kinds.index("SELECT 1 / 0") + 1 :][: len(after)] == after, kinds
    assert count(world.engine, world.ledger) == 2
    assert world.balance() == 20


@pytest.mark.parametrize("kind", ["connection", "session"])
def test_g34_a_transaction_replaced_inside_the_block_fails_at_the_exit(
    world: World, kind: str
) -> None:
    """Inside the block the handler rolls back on SQLAlchemy's adapter and
    writes through a raw adapter cursor: the adapter begins a new transaction,
    which no SQLAlchemy event sees. At the exit asyncpg reports a transaction
    open, but not the one the block began in, so the guard releases its
    savepoint there and then: the release fails and the guard raises before
    the code after it runs. Nothing commits; the redelivery applies once."""
    statement = f"INSERT INTO {world.prefix}ledger (command_id, amount) VALUES ('raw', 1)"

    def replace(sync: Connection) -> None:
        adapter: Any = sync.connection.dbapi_connection
        adapter.rollback()
        adapter.cursor().execute(statement)

    async def body(engine: AsyncEngine) -> list[bool]:
        await _deliver(world, engine, "warm")
        after: list[bool] = []
        with pytest.raises(ConfigurationError, match="inside the guarded block"):
            async with AsyncSession(engine) as session, session.begin():
                conn = await session.connection()
                target: Any = session if kind == "session" else conn
                async with world.box.guard_async(target, consumer="c", command_id="r", payload={}):
                    await conn.run_sync(replace)
                after.append(True)
        assert await _deliver(world, engine, "r")
        assert not await _deliver(world, engine, "r")
        return after

    assert world.run(body) == []
    assert count(world.engine, world.ledger) == 2  # warm and the redelivery: no 'raw'
    assert world.balance() == 20


def test_g34_every_route_after_the_block_settles_the_kept_release(world: World) -> None:
    """After the block, the kept-back release goes with the adapter's own
    ``commit()``; a rollback drops it (nothing commits, and the next
    transaction on the same connection starts clean); a ``COMMIT`` statement
    ends the transaction with it; more work after the block commits with the
    rest. Every applied command applies once."""
    ledger = world.ledger

    def driver_commit(sync: Connection) -> None:
        sync.connection.dbapi_connection.commit()  # type: ignore[union-attr]

    async def body(engine: AsyncEngine) -> tuple[list[str], list[str]]:
        await _deliver(world, engine, "warm")
        async with traced(engine) as committed, engine.connect() as conn:
            await conn.begin()
            async with world.box.guard_async(conn, consumer="c", command_id="driver", payload={}):
                await _apply(world, conn, "driver")
            await conn.run_sync(driver_commit)  # behind SQLAlchemy's back, outside the block
            await conn.rollback()  # SQLAlchemy's bookkeeping catches up; nothing left to roll back
        async with traced(engine) as rolled, engine.connect() as conn:
            async with conn.begin() as tx:
                async with world.box.guard_async(
                    conn, consumer="c", command_id="rolled", payload={}
                ):
                    await _apply(world, conn, "rolled")
                await tx.rollback()
        async with engine.connect() as conn, conn.begin():
            async with world.box.guard_async(
                conn, consumer="c", command_id="statement", payload={}
            ):
                await _apply(world, conn, "statement")
            await conn.exec_driver_sql("COMMIT")
        async with engine.connect() as conn, conn.begin():
            async with world.box.guard_async(conn, consumer="c", command_id="more", payload={}):
                await _apply(world, conn, "more")
            await conn.execute(ledger.insert().values(command_id="after the block", amount=0))
        assert await _deliver(world, engine, "rolled")
        for cid in ("driver", "statement", "more"):
            assert not await _deliver(world, engine, cid)
        return world.kinds(committed), world.kinds(rolled)

    committed, rolled = world.run(body)
    assert committed[-1] == "release + COMMIT", committed
    assert rolled[-1] == "ROLLBACK", rolled
    assert not any(k.startswith("release") for k in rolled), rolled
    assert count(world.engine, ledger) == 1 + 4 + 1
    assert world.balance() == 50


def test_g34_the_shared_begin_keeps_the_isolation_level(world: World) -> None:
    """A connection set to SERIALIZABLE and DEFERRABLE (SQLAlchemy's execution
    options) gets the guard's savepoint with the very ``BEGIN`` asyncpg would
    send: the block runs at the level the caller chose."""

    async def body(engine: AsyncEngine) -> tuple[list[str], Any]:
        await _deliver(world, engine, "warm")
        async with traced(engine) as wire, engine.connect() as base:
            conn = await base.execution_options(
                isolation_level="SERIALIZABLE", postgresql_deferrable=True
            )
            async with conn.begin():
                async with world.box.guard_async(conn, consumer="c", command_id="s", payload={}):
                    level = (await conn.exec_driver_sql("SHOW transaction_isolation")).scalar()
                    await _apply(world, conn, "s")
        return wire.statements, level

    statements, level = world.run(body)
    assert level == "serializable"
    assert statements[0] == (
        "BEGIN ISOLATION LEVEL SERIALIZABLE DEFERRABLE; SAVEPOINT sa_savepoint_1"
    ), statements
    assert world.balance() == 20


def test_g34_a_two_phase_transaction_releases_at_the_exit(world: World) -> None:
    """In a two-phase transaction the commit is a ``PREPARE TRANSACTION`` and
    a ``COMMIT PREPARED`` that could not carry the release, so the guard
    releases its savepoint at the exit, where the database still checks it."""

    async def body(engine: AsyncEngine) -> list[str]:
        await _deliver(world, engine, "warm")
        async with traced(engine) as wire, engine.connect() as conn:
            twophase = await conn.run_sync(lambda sync: sync.begin_twophase())
            async with world.box.guard_async(conn, consumer="c", command_id="2pc", payload={}):
                await _apply(world, conn, "2pc")
            await conn.run_sync(lambda _: twophase.rollback())
        return world.kinds(wire)

    kinds = world.run(body)
    assert "release" in kinds, kinds
    assert not any("release + COMMIT" in k for k in kinds), kinds
    assert world.box.lookup("c", "2pc") is None
    assert count(world.engine, world.ledger) == 1


class _CancelledAfterBegin:
    """The asyncpg protocol, raising CancelledError once the server has
    answered the ``BEGIN`` sent with the guard's savepoint (a task cancelled
    right then)."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    async def query(self, query: str, timeout: Any) -> Any:
        result = await self._real.query(query, timeout)
        if query.startswith("BEGIN") and "SAVEPOINT" in query:
            raise asyncio.CancelledError
        return result


@pytest.mark.parametrize("world", ["asyncpg"], indirect=True)  # its protocol is replaced
def test_g34_a_cancellation_on_the_shared_begin_leaves_the_connection_clean(
    world: World,
) -> None:
    """The delivery is cancelled while ``BEGIN; SAVEPOINT`` is on its way
    (here just after the server began the transaction): the transaction is
    rolled back as the delivery unwinds, so the pooled connection goes back
    outside any transaction and its next delivery applies."""

    async def body(engine: AsyncEngine) -> bool:
        await _deliver(world, engine, "warm")
        async with engine.connect() as conn:
            driver = await _driver(conn)
        real = driver._protocol
        driver._protocol = _CancelledAfterBegin(real)
        try:
            with pytest.raises(asyncio.CancelledError):
                await _deliver(world, engine, "x")
        finally:
            driver._protocol = real
        assert not driver.is_in_transaction()
        return await _deliver(world, engine, "x")

    assert world.run(body)
    assert world.box.lookup("c", "x") is not None
    assert world.balance() == 20
