"""The caller's transaction, checked in one place.

The services write their rows on the caller's own connection so that they
commit or roll back with the caller's changes. These functions take what the
caller passed (a SQLAlchemy ``Session`` or ``Connection``, or their asyncio
twins), return its connection, and refuse two mistakes with a message that
names the fix: an object of another kind, and a connection that commits each
statement on its own (autocommit), so a service's row could commit without
the caller's changes.

Autocommit is judged on what the database driver's connection does, not only
on what SQLAlchemy was told: ``isolation_level="AUTOCOMMIT"`` on the engine or
the connection, driver autocommit through ``connect_args`` (psycopg,
PyMySQL, asyncpg) and ``sqlite3``'s ``isolation_level=None`` or
``autocommit=True`` are all seen on the driver connection. A driver in
autocommit mode that is inside an explicit ``BEGIN`` (SQLAlchemy's pysqlite
recipe: ``BEGIN`` emitted from a ``begin`` event listener) is transactional
and accepted.

:func:`transaction_mark` and :func:`transaction_kept` tell whether the
transaction a service wrote in is still the caller's open transaction, so a
commit or rollback inside a guarded block is caught before anything else can
commit. :func:`spare_connection_problem` says why an engine cannot give a
connection of its own right now (its pool hands out the caller's connection,
or it is exhausted), so a write meant for its own transaction never lands on
the caller's connection and never waits for the pool.

The asyncio check imports ``sqlalchemy.ext.asyncio`` only when it is called,
so a sync-only program never loads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection
from sqlalchemy.engine import Engine, RootTransaction, Transaction
from sqlalchemy.orm import Session
from sqlalchemy.pool import Pool, QueuePool, SingletonThreadPool, StaticPool

from inboxguard.errors import ConfigurationError

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

__all__ = [
    "TransactionMark",
    "async_connection_of",
    "check_engine",
    "connection_of",
    "driver_left_transaction",
    "driver_transaction_aborted",
    "refuse_shared_pool",
    "refuse_split_session",
    "shared_pool_problem",
    "spare_connection_problem",
    "transaction_kept",
    "transaction_mark",
]

_FIX = (
    "use a transactional connection: remove isolation_level='AUTOCOMMIT' and any"
    " driver autocommit (connect_args autocommit=True, sqlite3 isolation_level=None)"
    " from create_engine(), or, with sqlite3 isolation_level=None, emit BEGIN from a"
    " 'begin' event listener as SQLAlchemy's SQLite guide shows"
)
#: psycopg's ``TransactionStatus`` INTRANS and INERROR: inside a transaction block.
_PG_IN_TRANSACTION = (2, 3)
#: psycopg's ``TransactionStatus`` INERROR: a failed statement aborted the transaction.
_PG_ABORTED = 3
#: MySQL's ``SERVER_STATUS_IN_TRANS`` bit of the server status flags.
_MYSQL_IN_TRANS = 1


def check_engine(engine: object, *, async_hint: str = "") -> Engine:
    """Return ``engine`` if it is a sync SQLAlchemy ``Engine``, else raise
    ConfigurationError; ``async_hint`` is added when an ``AsyncEngine`` was passed."""
    if not isinstance(engine, Engine):
        msg = f"engine must be a sqlalchemy Engine, got {type(engine).__name__}"
        if async_hint and hasattr(engine, "sync_engine"):
            msg += async_hint
        raise ConfigurationError(msg)
    return engine


def connection_of(session: Session | Connection, *, wrong_type: str, row: str) -> Connection:
    """Return the connection of a sync ``Session`` or ``Connection``, inside its
    transaction.

    A ``Connection`` whose transaction has not begun yet is begun, as its
    first statement would begin it.

    Args:
        session: what the caller passed.
        wrong_type: the refusal for any other object; ``{type}`` is replaced
            by its type's name.
        row: what could commit alone in autocommit mode, e.g. ``"the inbox
            row could commit without the handler's changes"``.

    Raises:
        ConfigurationError: ``session`` is of another kind, or its connection
            commits each statement on its own.
    """
    if isinstance(session, Session):
        refuse_split_session(session)
        conn = session.connection()
    elif isinstance(session, Connection):
        conn = session
        if not conn.in_transaction():
            conn.begin()
    else:
        raise ConfigurationError(wrong_type.format(type=type(session).__name__))
    _refuse_autocommit(conn, row)
    return conn


async def async_connection_of(
    session: AsyncSession | AsyncConnection, *, wrong_type: str, row: str
) -> AsyncConnection:
    """:func:`connection_of` for an ``AsyncSession`` or ``AsyncConnection``.

    An ``AsyncConnection`` that has not started yet is started, and its
    transaction begun.

    Raises:
        ConfigurationError: as :func:`connection_of`.
    """
    from sqlalchemy.ext.asyncio import (  # noqa: PLC0415 - only asyncio callers load it
        AsyncConnection,
        AsyncSession,
    )

    if isinstance(session, AsyncSession):
        refuse_split_session(session.sync_session)
        conn = await session.connection()
    elif isinstance(session, AsyncConnection):
        conn = session
        if conn.sync_connection is None:
            conn = await conn.start()
        if not conn.in_transaction():
            await conn.begin()
    else:
        raise ConfigurationError(wrong_type.format(type=type(session).__name__))
    _refuse_autocommit(conn.sync_connection, row)  # type: ignore[arg-type]  # started above
    return conn


def refuse_split_session(session: Session) -> None:
    """Raise ConfigurationError when ``session``'s binds reach more than one
    engine: each engine is a transaction of its own, committed one after the
    other, so the inbox row could commit on one database and the handler's
    changes be lost on another (a process killed between the two commits)."""
    binds: dict[Any, Any] = getattr(session, "_Session__binds", {})
    engines = {id(_engine_of(b)): _engine_of(b) for b in (session.bind, *binds.values()) if b}
    if len(engines) > 1:
        urls = ", ".join(sorted(e.url.render_as_string() for e in engines.values()))
        msg = (
            f"the session's binds reach {len(engines)} engines ({urls}): its commit is"
            " one transaction per engine, so the inbox row could commit without the"
            " handler's changes on another database. Put the inbox tables on the"
            " handler's database and give the guard a session bound to that one engine"
        )
        raise ConfigurationError(msg)


def _engine_of(bind: Any) -> Any:
    return bind.engine if isinstance(bind, Connection) else bind


@dataclass(frozen=True, slots=True)
class TransactionMark:
    """The caller's transaction as it was when a service wrote in it: the
    connection, its root transaction and the innermost (savepoint or root)."""

    conn: Connection
    root: RootTransaction
    innermost: Transaction


def transaction_mark(conn: Connection) -> TransactionMark:
    """Mark the transaction ``conn`` is in now (call after a statement ran on it)."""
    root = conn.get_transaction()
    if root is None:
        msg = "the connection is not in a transaction; a service wrote outside the caller's"
        raise ConfigurationError(msg)
    return TransactionMark(conn, root, conn.get_nested_transaction() or root)


def transaction_kept(mark: TransactionMark) -> bool:
    """True while the marked transaction is still open on its connection: not
    committed, not rolled back (savepoints opened after the mark may come and go)."""
    conn = mark.conn
    return (
        not conn.closed
        and conn.get_transaction() is mark.root
        and mark.root.is_active
        and mark.innermost.is_active
    )


def shared_pool_problem(pool: Pool) -> str | None:
    """Why ``pool`` can never give a connection other than the caller's, or None.

    ``SingletonThreadPool`` (SQLAlchemy's default for an in-memory SQLite
    database) and ``StaticPool`` hand out one connection to every checkout
    (of a thread), so a "transaction of its own" would run on the caller's
    connection and commit the caller's writes.
    """
    if isinstance(pool, SingletonThreadPool | StaticPool):
        return (
            f"the engine's {type(pool).__name__} hands out the caller's own connection,"
            " so a transaction of its own would commit the caller's writes"
        )
    return None


def refuse_shared_pool(engine: Engine, service: str) -> None:
    """Raise ConfigurationError when ``engine``'s pool hands out the caller's own
    connection (:func:`shared_pool_problem`), for a ``service`` that runs short
    transactions of its own next to the caller's."""
    problem = shared_pool_problem(engine.pool)
    if problem is not None:
        msg = (
            f"{service} cannot use this engine: {problem}, and returning it to the pool"
            " would roll back the caller's open transaction; create the engine with a"
            " pool of separate connections (the default QueuePool, or NullPool; for"
            " SQLite, a database file instead of ':memory:')"
        )
        raise ConfigurationError(msg)


def spare_connection_problem(pool: Pool) -> str | None:
    """Why ``pool`` cannot give a connection other than the caller's right now,
    or None when it can without waiting.

    Beyond :func:`shared_pool_problem`: a ``QueuePool`` with every connection
    checked out and no overflow left would make the caller wait, up to the
    pool's timeout, for a connection only it can give back.
    """
    shared = shared_pool_problem(pool)
    if shared is not None:
        return shared
    if isinstance(pool, QueuePool) and pool.checkedin() == 0:
        limit: int = getattr(pool, "_max_overflow", -1)
        if limit >= 0 and pool.overflow() >= limit:
            return (
                f"the engine's pool has no free connection (pool_size={pool.size()},"
                f" max_overflow={limit}, {pool.checkedout()} checked out)"
            )
    return None


def _refuse_autocommit(conn: Connection, row: str) -> None:
    if conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
        how = "the isolation_level='AUTOCOMMIT' execution option"
    elif _driver_autocommits(conn) and not _driver_in_transaction(conn):
        how = f"the {conn.dialect.name}+{conn.dialect.driver} driver connection is in autocommit"
    else:
        return
    msg = (
        f"the connection runs in AUTOCOMMIT mode ({how}): each statement commits on"
        f" its own, so {row}; {_FIX}"
    )
    raise ConfigurationError(msg)


def _driver_autocommits(conn: Connection) -> bool:
    """True when the driver connection commits each statement on its own."""
    fairy = conn.connection
    dbapi = fairy.dbapi_connection
    if dbapi is None:  # a connection SQLAlchemy invalidated runs no statement at all
        return False
    for obj in (dbapi, fairy.driver_connection):
        # psycopg, the asyncpg adapter and sqlite3 (Python 3.12+, where True or
        # False overrides isolation_level) keep a bool; PyMySQL has a method.
        mode = getattr(obj, "autocommit", None)
        if isinstance(mode, bool):
            return mode
    try:
        return bool(conn.dialect.detect_autocommit_setting(dbapi))
    except NotImplementedError:
        return False


def driver_left_transaction(conn: Connection) -> bool:
    """True when the driver connection reports, in process, that it is outside
    any transaction (a commit or rollback SQLAlchemy did not see); False when
    it is inside one or cannot tell."""
    driver: Any = conn.connection.driver_connection
    if type(driver) in _PSYCOPG:  # read per body statement: skip the probing below
        return int(driver.pgconn.transaction_status) == 0
    status = getattr(driver, "in_transaction", None)  # sqlite3, aiosqlite
    if isinstance(status, bool):
        return not status
    probe = getattr(driver, "is_in_transaction", None)  # asyncpg
    if callable(probe):
        return not probe()
    info = getattr(driver, "info", None)  # psycopg
    if info is not None and hasattr(info, "transaction_status"):
        if type(driver).__module__.startswith("psycopg") and hasattr(driver, "pgconn"):
            _PSYCOPG.add(type(driver))  # info is a view of pgconn, built anew on each read
        return int(info.transaction_status) == 0  # IDLE: no transaction block
    return False


def driver_transaction_aborted(conn: Connection) -> bool:
    """True when the driver connection reports, in process, that a failed
    statement aborted its transaction (PostgreSQL through psycopg, sync or
    asyncio: nothing but a rollback, whole or to a savepoint, can follow);
    False when it is healthy, lost (an invalidated connection, which the
    caller's error already reports) or the driver cannot tell (asyncpg, the
    other drivers)."""
    if conn.invalidated or conn.closed:
        return False
    pgconn = getattr(conn.connection.driver_connection, "pgconn", None)
    status = getattr(pgconn, "transaction_status", None)
    return status is not None and int(status) == _PG_ABORTED


#: psycopg's connection classes seen by :func:`driver_left_transaction`.
_PSYCOPG: set[type] = set()


def _driver_in_transaction(conn: Connection) -> bool:
    """True when the driver connection is inside an explicit transaction block."""
    driver: Any = conn.connection.driver_connection
    status = getattr(driver, "in_transaction", None)  # sqlite3, aiosqlite
    if isinstance(status, bool):
        return status
    probe = getattr(driver, "is_in_transaction", None)  # asyncpg
    if callable(probe):
        return bool(probe())
    info = getattr(driver, "info", None)  # psycopg
    if info is not None and hasattr(info, "transaction_status"):
        return int(info.transaction_status) in _PG_IN_TRANSACTION
    server_status = getattr(driver, "server_status", None)  # PyMySQL
    if isinstance(server_status, int):
        return bool(server_status & _MYSQL_IN_TRANS)
    return False
