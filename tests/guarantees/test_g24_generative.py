"""G24: the invariant, over generated handler programs.

Hypothesis builds a handler program from steps (a write, an error raised,
an error caught inside the block, a savepoint released or rolled back, a
commit by each route, the transaction ended behind the library's back as a
deadlock does, a nested guard of another command, a cancellation on
asyncio) and says whether the caller catches what leaves the block and
commits anyway. Each program runs in a guarded block on SQLite, PostgreSQL
and MariaDB (a sync ``Session``), on aiosqlite and asyncpg, and through the
Django store; then the command is delivered again, once with a handler that
behaves and once with another payload. After each example:

- the evidence committed if and only if every change the block meant to keep
  committed (the writes outside rolled-back savepoints), and otherwise none did;
- the command was applied exactly once after the redelivery (never twice);
- the mismatched delivery was refused and quarantined.

The suite runs a few seeded examples per backend; a longer run is
``INBOXGUARD_HYPOTHESIS_EXAMPLES=500 .venv/bin/pytest tests/guarantees/test_g24_generative.py``.
A failing example shrinks to the shortest program, printed step by step.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, func, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from inboxguard import ConfigurationError, Inbox, PayloadMismatchError
from tests.conftest import unique

EXAMPLES = int(os.environ.get("INBOXGUARD_HYPOTHESIS_EXAMPLES", "8"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=True,  # seeded: the same programs on every run of the suite
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class HandlerError(Exception):
    """The handler's own failure."""


# -- the program ----------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    """Insert one row of this command's changes."""

    def __repr__(self) -> str:
        return "write"


@dataclass(frozen=True)
class Raise:
    """Raise the handler's own error (it leaves the block)."""

    def __repr__(self) -> str:
        return "raise"


@dataclass(frozen=True)
class CatchInside:
    """A statement that fails (a duplicate key), caught inside the block
    without a savepoint of its own."""

    def __repr__(self) -> str:
        return "fail a statement, catch it inside"


@dataclass(frozen=True)
class Savepoint:
    """Steps in a savepoint of the block's own, then released or rolled back."""

    body: tuple[Any, ...]
    rollback: bool

    def __repr__(self) -> str:
        return f"savepoint{list(self.body)!r} then {'rollback' if self.rollback else 'release'}"


@dataclass(frozen=True)
class Commit:
    """Commit by ``route``; ``catch``: the handler catches the refusal and goes on."""

    route: str
    catch: bool

    def __repr__(self) -> str:
        return f"commit by {self.route}{', catch and go on' if self.catch else ''}"


@dataclass(frozen=True)
class Ended:
    """The transaction ends behind the library's back (a rollback on the driver
    connection: what InnoDB does to a deadlock's victim), and the handler goes on."""

    def __repr__(self) -> str:
        return "transaction rolled back under the handler (deadlock), go on"


@dataclass(frozen=True)
class Nested:
    """A guard of another command inside the block, writing its own row."""

    def __repr__(self) -> str:
        return "nested guard of another command"


@dataclass(frozen=True)
class Cancel:
    """The task is cancelled (asyncio only; a ``Raise`` elsewhere)."""

    def __repr__(self) -> str:
        return "cancelled"


@dataclass(frozen=True)
class Program:
    """The block's steps and what the caller does with what leaves the block."""

    steps: tuple[Any, ...]
    catch_outside: bool

    def __repr__(self) -> str:
        outside = "caller catches and commits" if self.catch_outside else "caller rolls back"
        return f"Program({' -> '.join(map(repr, self.steps)) or 'nothing'}; {outside})"


ROUTES = ("session.commit()", "connection.commit()", "COMMIT statement", "driver commit()")
_leaf = st.one_of(
    st.just(Write()),
    st.just(Write()),
    st.just(Raise()),
    st.just(CatchInside()),
    st.builds(Commit, st.sampled_from(ROUTES), st.booleans()),
    st.just(Ended()),
    st.just(Nested()),
    st.just(Cancel()),
)
_step = st.one_of(
    _leaf,
    st.builds(Savepoint, st.lists(_leaf, max_size=3).map(tuple), st.booleans()),
)
programs = st.builds(Program, st.lists(_step, max_size=5).map(tuple), st.booleans())


# -- what the program should leave ----------------------------------------------------


def kept_writes(steps: tuple[Any, ...]) -> int:
    """The writes a clean run of ``steps`` keeps (none inside a rolled-back savepoint)."""
    n = 0
    for step in steps:
        if isinstance(step, Write):
            n += 1
        elif isinstance(step, Savepoint) and not step.rollback:
            n += kept_writes(step.body)
    return n


# -- the database ---------------------------------------------------------------------


@dataclass
class World:
    """An inbox and the command's table on one database."""

    inbox: Inbox
    rows: Table
    engine: Engine

    def applied(self, cid: str) -> int:
        with self.engine.connect() as conn:
            query = select(func.count()).select_from(self.rows).where(self.rows.c.cid == cid)
            return int(conn.execute(query).scalar_one())


def _tables(prefix: str) -> tuple[MetaData, Table]:
    md = MetaData()
    rows = Table(
        f"{prefix}rows",
        md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("cid", String(80), nullable=False),
        Column("k", Integer, nullable=False, unique=True),
    )
    return md, rows


@pytest.fixture
def world(db_url: str, prefix: str) -> Iterator[World]:
    engine = create_engine(db_url)
    inbox = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    md, rows = _tables(prefix)
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(rows.insert().values(cid="taken", k=0))  # what CatchInside collides with
    yield World(inbox, rows, engine)
    md.drop_all(engine)
    inbox.drop_schema()
    engine.dispose()


_counter = iter(range(1, 10**9))


def _write(session: Session, rows: Table, cid: str) -> None:
    session.execute(rows.insert().values(cid=cid, k=next(_counter)))


def _run_sync(w: World, session: Session, cid: str, steps: tuple[Any, ...]) -> None:  # noqa: PLR0912 - one branch per step kind
    for step in steps:
        match step:
            case Write():
                _write(session, w.rows, cid)
            case Raise() | Cancel():
                raise HandlerError
            case CatchInside():
                with contextlib.suppress(DBAPIError):
                    session.execute(w.rows.insert().values(cid=cid, k=0))
            case Savepoint(body, rollback):
                sp = session.begin_nested()
                try:
                    _run_sync(w, session, cid, body)
                finally:
                    if sp.is_active:
                        sp.rollback() if rollback else sp.commit()
            case Commit(route, catch):
                try:
                    if route == "session.commit()":
                        session.commit()
                    elif route == "connection.commit()":
                        session.connection().commit()
                    elif route == "driver commit()":
                        session.connection().connection.dbapi_connection.commit()  # type: ignore[union-attr]
                    else:
                        session.execute(text("COMMIT"))
                except (ConfigurationError, sqlite3.DatabaseError):
                    if not catch:
                        raise
            case Ended():
                session.connection().connection.dbapi_connection.rollback()  # type: ignore[union-attr]
            case Nested():
                inner = f"{cid}-nested"
                with w.inbox.guard(session, consumer="g", command_id=inner, payload={}) as e:
                    if not e.duplicate:
                        _write(session, w.rows, inner)


def _deliver_sync(w: World, cid: str, program: Program) -> bool:
    """Run the program; True when the guarded block ended without an error."""
    ended = False
    # What leaves the caller's transaction has rolled it back: judged by _check.
    with contextlib.suppress(Exception), Session(w.engine) as session, session.begin():
        try:
            with w.inbox.guard(session, consumer="g", command_id=cid, payload={"v": 1}):
                _run_sync(w, session, cid, program.steps)
            ended = True
        except Exception:
            if not program.catch_outside:
                raise
    return ended


def _check(
    w: World, cid: str, program: Program, ended: bool, redeliver: Any, mismatch: Any
) -> None:
    """The invariant after ``program`` (``ended``: its guarded block ended
    without an error), its redelivery and a mismatched delivery."""
    evidence = w.inbox.lookup("g", cid) is not None
    applied = w.applied(cid)
    if evidence:  # only a block that ended well commits, and then all it kept
        assert ended, (program, "evidence of a block that failed")
        assert applied == kept_writes(program.steps), (program, applied)
    else:
        assert applied == 0, (program, applied)
    redeliver()
    assert w.inbox.lookup("g", cid) is not None
    assert w.applied(cid) == (applied if evidence else 1), program  # never twice
    with pytest.raises(PayloadMismatchError):
        mismatch()
    assert w.inbox.quarantine_records_of("g", cid), program
    nested = f"{cid}-nested"
    assert w.applied(nested) == (1 if w.inbox.lookup("g", nested) is not None else 0)


@SETTINGS
@given(program=programs)
def test_g24_generated_programs_sync(world: World, program: Program) -> None:
    """Every generated program keeps the invariant on a sync ``Session``."""
    w = world
    cid = unique("p")

    def redeliver() -> None:
        with Session(w.engine) as session, session.begin():
            with w.inbox.guard(session, consumer="g", command_id=cid, payload={"v": 1}) as e:
                if not e.duplicate:
                    _write(session, w.rows, cid)

    def mismatch() -> None:
        with Session(w.engine) as session, session.begin():
            with w.inbox.guard(session, consumer="g", command_id=cid, payload={"v": 2}):
                pass  # pragma: no cover - refused

    ended = _deliver_sync(w, cid, program)
    _check(w, cid, program, ended, redeliver, mismatch)


# -- asyncio --------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def async_world(request: pytest.FixtureRequest, prefix: str) -> Iterator[tuple[World, str]]:
    from tests.inbox.async_guard.conftest import async_url

    url = str(
        request.getfixturevalue({"sqlite": "sqlite_url", "postgresql": "pg_url"}[request.param])
    )
    engine = create_engine(url)
    inbox = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    md, rows = _tables(prefix)
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(rows.insert().values(cid="taken", k=0))
    yield World(inbox, rows, engine), async_url(url)
    md.drop_all(engine)
    inbox.drop_schema()
    engine.dispose()


async def _run_async(w: World, session: Any, cid: str, steps: tuple[Any, ...]) -> None:  # noqa: PLR0912 - one branch per step kind
    for step in steps:
        match step:
            case Write():
                await session.execute(w.rows.insert().values(cid=cid, k=next(_counter)))
            case Raise():
                raise HandlerError
            case Cancel():
                asyncio.current_task().cancel()  # type: ignore[union-attr]
                await asyncio.sleep(0)
            case CatchInside():
                with contextlib.suppress(DBAPIError):
                    await session.execute(w.rows.insert().values(cid=cid, k=0))
            case Savepoint(body, rollback):
                sp = await session.begin_nested()
                try:
                    await _run_async(w, session, cid, body)
                finally:
                    if sp.is_active:
                        await (sp.rollback() if rollback else sp.commit())
            case Commit(route, catch):
                try:
                    if route == "session.commit()":
                        await session.commit()
                    elif route == "connection.commit()":
                        await (await session.connection()).commit()
                    elif route == "driver commit()":
                        conn = await session.connection()
                        await conn.run_sync(lambda c: c.connection.dbapi_connection.commit())
                    else:
                        await session.execute(text("COMMIT"))
                except (ConfigurationError, sqlite3.DatabaseError):
                    if not catch:
                        raise
            case Ended():
                conn = await session.connection()
                await conn.run_sync(lambda c: c.connection.dbapi_connection.rollback())
            case Nested():
                inner = f"{cid}-nested"
                async with w.inbox.guard_async(
                    session, consumer="g", command_id=inner, payload={}
                ) as e:
                    if not e.duplicate:
                        await session.execute(w.rows.insert().values(cid=inner, k=next(_counter)))


@SETTINGS
@given(program=programs)
def test_g24_generated_programs_async(async_world: tuple[World, str], program: Program) -> None:
    """Every generated program keeps the invariant on an ``AsyncSession``
    (aiosqlite, asyncpg), cancellation included."""
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    w, aurl = async_world
    cid = unique("p")

    async def deliver(payload: dict[str, int], steps: tuple[Any, ...] | None, catch: bool) -> None:
        engine = create_async_engine(aurl)
        try:
            async with AsyncSession(engine) as session:
                with contextlib.suppress(Exception):
                    async with session.begin():
                        task = asyncio.ensure_future(guarded(session, payload, steps))
                        try:
                            await task
                        except (Exception, asyncio.CancelledError):
                            if not catch:
                                raise HandlerError from None
        finally:
            await engine.dispose()

    ended: list[bool] = []

    async def guarded(session: Any, payload: dict[str, int], steps: tuple[Any, ...] | None) -> None:
        """The program's steps, or (None) the clean redelivery's one write."""
        async with w.inbox.guard_async(
            session, consumer="g", command_id=cid, payload=payload
        ) as entry:
            if steps is not None:
                await _run_async(w, session, cid, steps)
            elif not entry.duplicate:
                await _run_async(w, session, cid, (Write(),))
        ended.append(steps is not None)

    async def refused() -> None:
        engine = create_async_engine(aurl)
        try:
            async with AsyncSession(engine) as session, session.begin():
                await guarded(session, {"v": 2}, ())
        finally:
            await engine.dispose()

    asyncio.run(deliver({"v": 1}, program.steps, program.catch_outside))
    _check(
        w,
        cid,
        program,
        bool(ended),
        lambda: asyncio.run(deliver({"v": 1}, None, False)),
        lambda: asyncio.run(refused()),
    )
