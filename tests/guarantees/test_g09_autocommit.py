"""G9: autocommit in any form is refused, judged on the driver connection.

Each form a user can reach (the engine's ``isolation_level``, the driver's
own autocommit through ``connect_args``, sqlite3's ``isolation_level=None``,
the asyncio engines) is refused before the claim, on the real database, and
nothing commits. SQLAlchemy's pysqlite recipe (driver autocommit with
``BEGIN`` emitted from a ``begin`` event) is transactional and keeps working.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from inboxguard import ConfigurationError, Inbox, Outbox
from tests.helpers import apply, count, create_business

EngineFactory = Callable[[str], Engine]
DRIVER_AUTOCOMMIT = {
    "sqlite": {"isolation_level": None},
    "postgresql": {"autocommit": True},
    "mysql": {"autocommit": True},
}


def _database(url: str) -> str:
    return url.split("://", 1)[0].split("+", 1)[0]


def engine_autocommit(url: str) -> Engine:
    """``create_engine(url, isolation_level="AUTOCOMMIT")``."""
    return create_engine(url, isolation_level="AUTOCOMMIT")


def driver_autocommit(url: str) -> Engine:
    """The driver's own autocommit through ``connect_args`` (psycopg and PyMySQL
    ``autocommit=True``, sqlite3 ``isolation_level=None``)."""
    return create_engine(url, connect_args=DRIVER_AUTOCOMMIT[_database(url)])


def sqlite_recipe(url: str) -> Engine:
    """SQLAlchemy's pysqlite recipe: no driver BEGIN, SQLAlchemy emits its own."""
    engine = create_engine(url)

    @event.listens_for(engine, "connect")
    def _no_driver_begin(dbapi_connection: Any, _record: object) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN")

    return engine


@pytest.fixture(params=[engine_autocommit, driver_autocommit], ids=["engine", "connect_args"])
def auto_engine(request: pytest.FixtureRequest, db_url: str) -> Iterator[Engine]:
    """An engine that commits each statement on its own, on each database."""
    factory: EngineFactory = request.param
    engine = factory(db_url)
    yield engine
    engine.dispose()


def test_g09_guard_refuses_every_autocommit_engine(inbox: Inbox, auto_engine: Engine) -> None:
    """The claim is never made on an autocommit connection, whether SQLAlchemy
    or the driver was told; nothing is written, the block never runs."""
    ran = []
    with Session(auto_engine) as session, pytest.raises(ConfigurationError, match="AUTOCOMMIT"):
        with inbox.guard(session, consumer="c", command_id="a-1", payload={}):
            ran.append(1)
    with auto_engine.connect() as conn, pytest.raises(ConfigurationError, match="autocommit"):
        with inbox.guard(conn, consumer="c", command_id="a-1", payload={}):
            ran.append(1)
    assert ran == []
    assert count(inbox.engine, inbox.tables.inbox) == 0
    assert count(inbox.engine, inbox.tables.quarantine) == 0


def test_g09_stale_message_on_autocommit_is_refused_as_configuration(
    inbox: Inbox, auto_engine: Engine
) -> None:
    """The session is judged first, so an old message on an autocommit engine
    fails the same way as any other, and is not quarantined."""
    old = dt.datetime.now(dt.UTC) - dt.timedelta(days=365)
    with Session(auto_engine) as session, pytest.raises(ConfigurationError, match="AUTOCOMMIT"):
        with inbox.guard(session, consumer="c", command_id="a-2", payload={}, sent_at=old):
            pass
    assert count(inbox.engine, inbox.tables.quarantine) == 0


def test_g09_outbox_add_refuses_every_autocommit_engine(
    db_url: str, auto_engine: Engine, prefix: str
) -> None:
    """A producer on an autocommit engine cannot leave an outbox row behind a
    business change that rolled back: ``add`` refuses before writing."""
    engine = create_engine(db_url)
    outbox = Outbox(engine, table_prefix=prefix)
    outbox.create_schema()
    try:
        with Session(auto_engine) as session, pytest.raises(ConfigurationError, match="outbox row"):
            outbox.add(session, command_id="o-1", destination="d", payload={"n": 1})
        assert outbox.get("o-1") is None
    finally:
        outbox.drop_schema()
        engine.dispose()


def test_g09_watermark_refuses_every_autocommit_engine(inbox: Inbox, auto_engine: Engine) -> None:
    """The watermark joins the caller's transaction too, so it is refused alike."""
    with Session(auto_engine) as session, pytest.raises(ConfigurationError, match="AUTOCOMMIT"):
        inbox.advance_watermark(session, consumer="c", key="k", position=1)
    assert count(inbox.engine, inbox.watermarks) == 0


class _Autocommit312(sqlite3.Connection):
    """What ``sqlite3.connect(autocommit=True)`` gives on Python 3.12+: every
    statement commits alone, and the connection says so in ``autocommit``."""

    autocommit = True

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.isolation_level = None


def _autocommit_args() -> dict[str, object]:
    if sys.version_info >= (3, 12):
        return {"autocommit": True}
    return {"factory": _Autocommit312}


def test_g09_sqlite3_autocommit_true_is_refused(sqlite_url: str, prefix: str) -> None:
    """Python 3.12's ``sqlite3.connect(autocommit=True)`` commits each statement
    (on 3.11 a connection class that behaves and reports the same way)."""
    inbox = Inbox(create_engine(sqlite_url), retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    auto = create_engine(sqlite_url, connect_args=_autocommit_args())
    with Session(auto) as session, pytest.raises(ConfigurationError, match="autocommit"):
        with inbox.guard(session, consumer="c", command_id="s-1", payload={}):
            pass
    assert count(inbox.engine, inbox.tables.inbox) == 0


def test_g09_pysqlite_begin_recipe_is_transactional(sqlite_url: str, prefix: str) -> None:
    """With the driver's BEGIN off and SQLAlchemy's on, the guard is accepted:
    a failing block leaves nothing, a committed one leaves the evidence."""
    engine = sqlite_recipe(sqlite_url)
    inbox = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    accounts, ledger = create_business(engine, prefix)
    with pytest.raises(RuntimeError), Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="r-1", payload={}):
            apply(session.connection(), accounts, ledger, "r-1", 5)
            raise RuntimeError("handler failed")
    assert inbox.lookup("c", "r-1") is None
    assert count(engine, ledger) == 0
    with engine.connect() as conn:
        with inbox.guard(conn, consumer="c", command_id="r-1", payload={}):
            apply(conn, accounts, ledger, "r-1", 5)
        conn.commit()
    assert inbox.lookup("c", "r-1") is not None
    assert count(engine, ledger) == 1
    engine.dispose()


# -- asyncio ------------------------------------------------------------------------------


def _async_url(url: str) -> str:
    scheme, rest = url.split("://", 1)
    driver = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}
    return f"{driver[_database(scheme + '://')]}://{rest}"


@pytest.fixture(params=["sqlite", "postgresql"])
def async_inbox(request: pytest.FixtureRequest, prefix: str) -> Iterator[Inbox]:
    """An inbox on aiosqlite's and asyncpg's databases."""
    url = str(
        request.getfixturevalue({"sqlite": "sqlite_url", "postgresql": "pg_url"}[request.param])
    )
    inbox = Inbox(create_engine(url), retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    yield inbox
    inbox.drop_schema()
    inbox.engine.dispose()


def test_g09_async_engine_autocommit_is_refused(async_inbox: Inbox) -> None:
    """``create_async_engine(..., isolation_level="AUTOCOMMIT")`` on asyncpg and
    aiosqlite is refused, through an AsyncSession and an AsyncConnection."""
    url = _async_url(async_inbox.engine.url.render_as_string(hide_password=False))

    async def main() -> None:
        engine = create_async_engine(url, isolation_level="AUTOCOMMIT")
        try:
            async with AsyncSession(engine) as session:
                with pytest.raises(ConfigurationError, match="AUTOCOMMIT"):
                    async with async_inbox.guard_async(
                        session, consumer="c", command_id="x-1", payload={}
                    ):
                        pass
            async with engine.connect() as conn:
                with pytest.raises(ConfigurationError, match="autocommit"):
                    async with async_inbox.guard_async(
                        conn, consumer="c", command_id="x-1", payload={}
                    ):
                        pass
        finally:
            await engine.dispose()

    asyncio.run(main())
    assert count(async_inbox.engine, async_inbox.tables.inbox) == 0


def test_g09_aiosqlite_begin_recipe_is_transactional(sqlite_url: str, prefix: str) -> None:
    """The recipe on aiosqlite: accepted, and a rollback leaves no evidence."""
    inbox = Inbox(create_engine(sqlite_url), retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()

    async def main() -> None:
        engine: AsyncEngine = create_async_engine(_async_url(sqlite_url))

        @event.listens_for(engine.sync_engine, "connect")
        def _no_driver_begin(dbapi_connection: Any, _record: object) -> None:
            dbapi_connection.isolation_level = None

        @event.listens_for(engine.sync_engine, "begin")
        def _begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN")

        try:
            async with AsyncSession(engine) as session:
                async with inbox.guard_async(session, consumer="c", command_id="y-1", payload={}):
                    pass
                await session.rollback()
            assert inbox.lookup("c", "y-1") is None
            async with AsyncSession(engine) as session:
                async with inbox.guard_async(session, consumer="c", command_id="y-1", payload={}):
                    pass
                await session.commit()
        finally:
            await engine.dispose()

    asyncio.run(main())
    assert inbox.lookup("c", "y-1") is not None
