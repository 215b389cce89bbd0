"""The hot path's statements, run on the caller's DBAPI cursor when nothing would notice.

Every guarded message runs the claim. Through ``Connection.execute``,
SQLAlchemy spends about as much CPU building the execution context and the
result around that one statement as the driver and the server spend running
it (``python -m benchmarks breakdown`` measures both). A :class:`DirectSelect`
is an ordinary SQLAlchemy text statement that :func:`execute` may instead send
straight to the DBAPI cursor of the caller's own connection: the same
connection and transaction, the same SQL text (so the same server-side
prepared statement), the same bind and result conversions of its column
types (:mod:`inboxguard.sql.cursor`, the executor the Django store runs on
too), and a driver error raised as the ``DBAPIError`` SQLAlchemy would have
raised, after invalidating the connection on a disconnect as SQLAlchemy does.

It goes direct only when the difference cannot be seen; otherwise SQLAlchemy
runs it, unchanged:

- the driver is psycopg (``postgresql+psycopg``, sync or asyncio) or asyncpg
  (``postgresql+asyncpg``), with SQLAlchemy's bind style for it;
- the connection has no ``schema_translate_map`` (a schema per tenant is
  rendered by SQLAlchemy at execution time);
- no listener of a statement event is registered on the engine, the
  connection or the dialect (``before_execute``, ``after_execute``,
  ``before_cursor_execute``, ``after_cursor_execute``, ``do_execute``,
  ``handle_error``): tracing and instrumentation see every statement;
- SQLAlchemy's statement logging (``echo``, or the ``sqlalchemy.engine``
  logger at INFO) is off.

On an ``AsyncConnection`` (:func:`execute_async`) the statement runs through
``AsyncConnection.run_sync`` on the DBAPI cursor SQLAlchemy adapts for the
asyncio driver, the way ``AsyncConnection.execute`` runs its own: the adapter
begins the transaction and awaits the driver as it does for any statement.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, Executable, TextualSelect
from sqlalchemy.engine import Dialect, Result
from sqlalchemy.exc import DBAPIError

from inboxguard.sql import opening
from inboxguard.sql.cursor import CursorStatement, fetch_rows

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["DirectSelect", "Rows", "direct", "execute", "execute_async", "unobserved", "watched"]

#: The drivers, and SQLAlchemy's bind style for each, the direct path is taken on.
_DRIVERS = {"psycopg": "pyformat", "asyncpg": "numeric_dollar"}


class DirectSelect(TextualSelect):
    """A text statement with typed binds and result columns that :func:`execute`
    may run on the DBAPI cursor (see the module's conditions)."""

    inherit_cache = True
    #: A variant that fails unless it changed exactly one row, which may be
    #: kept back and sent with the ``COMMIT`` (None: always sent when run).
    at_commit: DirectSelect | None = None

    def forms(self, dialect: Dialect) -> CursorStatement:
        """The compiled SQL and the type conversions for ``dialect`` (cached)."""
        cache: dict[Dialect, CursorStatement] = self.__dict__.setdefault("_direct_forms", {})
        form = cache.get(dialect)
        if form is None:
            form = cache[dialect] = CursorStatement(self, dialect)
        return form


def direct(statement: TextualSelect) -> DirectSelect:
    """``statement`` (built with ``text(...).bindparams(...).columns(...)``) as a
    :class:`DirectSelect`."""
    columns: list[Any] = list(statement.column_args)
    return DirectSelect(statement.element, columns, positional=statement.positional)


class Rows:
    """The part of a SQLAlchemy ``Result`` the hot path reads: ``first()``,
    ``all()`` and ``rowcount``."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def first(self) -> tuple[Any, ...] | None:
        """The first row, None when there is none."""
        return self._rows[0] if self._rows else None

    def all(self) -> list[tuple[Any, ...]]:
        """Every row."""
        return list(self._rows)


def execute(conn: Connection, statement: Executable, params: Mapping[str, Any]) -> Result[Any]:
    """Run ``statement`` on ``conn``: on the DBAPI cursor when it is a
    :class:`DirectSelect` and nothing would notice, else ``conn.execute``."""
    if isinstance(statement, DirectSelect) and unobserved(conn):
        return cast("Result[Any]", _run(conn, statement.forms(conn.dialect), params))
    return conn.execute(statement, params)


async def execute_async(
    conn: AsyncConnection, statement: Executable, params: Mapping[str, Any]
) -> Result[Any]:
    """:func:`execute` on an ``AsyncConnection``: on the adapted DBAPI cursor
    through ``run_sync`` when it may, else ``AsyncConnection.execute``."""
    sync = conn.sync_connection
    if isinstance(statement, DirectSelect) and sync is not None and unobserved(sync):
        rows = await conn.run_sync(_run, statement.forms(conn.dialect), params)
        return cast("Result[Any]", rows)
    return await conn.execute(statement, params)


def unobserved(conn: Connection) -> bool:
    """Whether running on the cursor is invisible: see the module's conditions."""
    dialect = conn.dialect
    if _DRIVERS.get(dialect.driver) != dialect.paramstyle:
        return False
    if watched(conn):
        return False
    return not conn.get_execution_options().get("schema_translate_map")


def watched(conn: Connection) -> bool:
    """Whether anyone watches the statements of ``conn``: a listener of a
    statement event on the engine, the connection or the dialect, or
    SQLAlchemy's statement logging. It reads the flags SQLAlchemy's own
    ``Connection.execute`` reads to decide whether to dispatch events and log;
    a SQLAlchemy without them is treated as watched. Whatever sends a
    statement past ``Connection.execute`` asks this first."""
    if getattr(conn, "_has_events", True) or getattr(conn.engine, "_has_events", True):
        return True
    return bool(getattr(conn.dialect, "_has_events", True) or getattr(conn, "_echo", True))


def _run(conn: Connection, form: CursorStatement, params: Mapping[str, Any]) -> Rows:
    args = form.args(params)
    fairy = conn.connection
    dbapi_conn = fairy.dbapi_connection
    dbapi: Any = conn.dialect.loaded_dbapi
    cursor = fairy.cursor()
    try:
        # the guard's BEGIN and savepoint kept back for this statement: one round trip
        sent = opening.run(dbapi_conn, form.sql, args) if opening.kept(dbapi_conn) else None
        raw, rowcount = fetch_rows(cursor, form.sql, args) if sent is None else sent
    except dbapi.Error as error:
        disconnect = conn.dialect.is_disconnect(error, dbapi_conn, cursor)
        wrapped = DBAPIError.instance(
            form.sql,
            args,
            error,
            dbapi.Error,
            connection_invalidated=disconnect,
            dialect=conn.dialect,
        )
        if disconnect:
            conn.invalidate(wrapped)
        raise wrapped from error
    finally:
        cursor.close()
    return Rows([form.convert(row) for row in raw], rowcount)
