"""SQLAlchemy statements run on a Django connection.

The inbox's and the outbox's statements are SQLAlchemy constructs, written
once per database (:mod:`inboxguard.sql.dialects`). On Django they run on the
connection of the caller's ``atomic()`` block, through the executor the hot
path uses too (:mod:`inboxguard.sql.cursor`): each statement is compiled
with the SQLAlchemy dialect of Django's database, with bound parameters in
the ``format`` paramstyle (``%s``) that every Django backend's cursor takes
(its SQLite cursor turns them into ``?``), and its values converted by its
column types exactly as a SQLAlchemy connection would do it.

Imports Django only inside functions: it is loaded by the caller.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Executable
from sqlalchemy.engine import Dialect as SaDialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.types import TypeDecorator, TypeEngine

from inboxguard.errors import UnsupportedDialectError
from inboxguard.sql.cursor import CursorStatement, Processor, fetch, result_processor

__all__ = ["DjangoResult", "DjangoRow", "StatementRunner", "dbapi_error", "sa_dialect_of"]

#: Compiled statements kept per runner (the dialects' statements are few and long-lived).
_CACHE_SIZE = 256


def sa_dialect_of(connection: Any) -> SaDialect:
    """The SQLAlchemy dialect of a Django connection's database and driver,
    compiling to the ``format`` paramstyle.

    Raises:
        UnsupportedDialectError: the Django backend is not PostgreSQL,
            MariaDB/MySQL or SQLite.
    """
    vendor = connection.vendor
    module = getattr(connection.Database, "__name__", "")
    if vendor == "postgresql":
        if module.startswith("psycopg2"):
            from sqlalchemy.dialects.postgresql.psycopg2 import dialect as pg2

            return pg2(paramstyle="format")  # type: ignore[no-untyped-call]
        from sqlalchemy.dialects.postgresql.psycopg import dialect as pg3

        return pg3(paramstyle="format")  # type: ignore[no-untyped-call]
    if vendor == "mysql":
        return _mysql_dialect(connection, pymysql=module.startswith("pymysql"))
    if vendor == "sqlite":
        from sqlalchemy.dialects.sqlite.pysqlite import dialect as lite

        return lite(paramstyle="format")
    msg = (
        f"Django database backend {connection.settings_dict.get('ENGINE')!r} ({vendor}) is"
        " not supported; inboxguard runs on PostgreSQL, MariaDB/MySQL and SQLite: point"
        " INBOXGUARD['DATABASE'] at one of them"
    )
    raise UnsupportedDialectError(msg)


def _mysql_dialect(connection: Any, *, pymysql: bool) -> SaDialect:
    """A MySQL dialect told what SQLAlchemy would learn on connecting: MariaDB
    or not, the server version, the connection's character set."""
    if pymysql:
        from sqlalchemy.dialects.mysql.pymysql import dialect as my
    else:
        from sqlalchemy.dialects.mysql.mysqldb import dialect as my  # type: ignore[assignment]
    sa_dialect: Any = my(paramstyle="format")
    connection.ensure_connection()
    version = tuple(connection.mysql_version)
    sa_dialect.server_version_info = version
    sa_dialect._set_mariadb(bool(connection.mysql_is_mariadb), version)  # noqa: SLF001
    raw = connection.connection
    charset = getattr(raw, "charset", None)
    if not isinstance(charset, str) and hasattr(raw, "character_set_name"):
        charset = raw.character_set_name()  # mysqlclient
    sa_dialect._connection_charset = charset  # noqa: SLF001 - read by require_utf8mb4
    return sa_dialect  # type: ignore[no-any-return]


class DjangoRow(tuple[Any, ...]):
    """A result row: by position, or by column name as an attribute."""

    _keys: dict[str, int]

    def __new__(cls, values: Sequence[Any], keys: dict[str, int]) -> DjangoRow:
        row = super().__new__(cls, values)
        row._keys = keys
        return row

    def __getattr__(self, name: str) -> Any:
        try:
            return self[self._keys[name]]
        except KeyError:
            raise AttributeError(name) from None


@dataclass(frozen=True, slots=True)
class DjangoResult:
    """The part of a SQLAlchemy ``Result`` the inbox's and outbox's statements read."""

    rows: list[DjangoRow]
    rowcount: int

    def first(self) -> DjangoRow | None:
        """The first row, or None."""
        return self.rows[0] if self.rows else None

    def one(self) -> DjangoRow:
        """The only row (exactly one is expected)."""
        if len(self.rows) != 1:
            msg = f"expected exactly one row, got {len(self.rows)}"
            raise RuntimeError(msg)
        return self.rows[0]

    def scalar_one(self) -> Any:
        """The first column of the only row."""
        return self.one()[0]

    def all(self) -> list[DjangoRow]:
        """Every row."""
        return list(self.rows)


class StatementRunner:
    """Compiles SQLAlchemy statements for one dialect and runs them on a Django
    cursor (through :mod:`inboxguard.sql.cursor`); quacks like a SQLAlchemy
    ``Connection`` for ``execute`` and ``dialect``."""

    def __init__(self, dialect: SaDialect, cursor: Callable[[], Any]) -> None:
        self.dialect = dialect
        self._cursor = cursor
        self._cache: dict[Any, CursorStatement] = {}

    def compile(self, statement: Executable, params: Mapping[str, Any]) -> tuple[str, list[Any]]:
        """The SQL (``%s`` placeholders) and the processed positional parameters."""
        done = self._compiled(statement)
        return done.sql, done.args(done.complete(params))

    def execute(self, statement: Executable, params: Mapping[str, Any] | None = None) -> Any:
        """Run ``statement`` on a cursor of the Django connection; a
        :class:`DjangoResult` (typed Any: it stands in for a ``Result``)."""
        done = self._compiled(statement)
        args = done.args(done.complete(params or {}))
        with self._cursor() as cursor:
            raw, rowcount, names = fetch(cursor, done.sql, args)
        if len(done.keys) == len(names):
            keys = {name: i for i, name in enumerate(done.keys)}
            rows = [DjangoRow(done.convert(r), keys) for r in raw]
        else:
            keys = {name: i for i, name in enumerate(names)}
            rows = [DjangoRow(r, keys) for r in raw]
        return DjangoResult(rows, rowcount)

    def _compiled(self, statement: Executable) -> CursorStatement:
        found = self._cache.get(statement)
        if found is not None:
            return found
        found = CursorStatement(statement, self.dialect, _result_processor)
        if len(self._cache) >= _CACHE_SIZE:
            self._cache.clear()
        self._cache[statement] = found
        return found


def _result_processor(type_: TypeEngine[Any], dialect: SaDialect) -> Processor | None:
    """The column type's result processing; a value the Django backend has
    already parsed (Django's SQLite converters return datetimes) skips the
    parsing step, not the type's own conversion."""
    process = result_processor(type_, dialect)
    if process is None:
        return None
    own = type_.process_result_value if isinstance(type_, TypeDecorator) else None

    def convert(value: Any) -> Any:
        if isinstance(value, dt.datetime):
            return own(value, dialect) if own is not None else value
        return process(value)

    return convert


def dbapi_error(error: Exception, sql: str, params: Sequence[Any], base: type) -> DBAPIError:
    """The SQLAlchemy error of a Django database error (its driver error is
    its ``__cause__``), for the flow's classification of busy and missing-table
    errors."""
    orig = error.__cause__ if isinstance(error.__cause__, Exception) else error
    found = DBAPIError.instance(sql, list(params), orig, base)
    if isinstance(found, DBAPIError):
        return found
    return DBAPIError(sql, list(params), orig)
