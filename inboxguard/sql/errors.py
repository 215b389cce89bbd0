"""The one place that classifies database errors from the drivers.

Lock timeouts, deadlocks, serialization failures and statement timeouts (the
caller's ``statement_timeout`` or ``max_statement_time`` ending a statement
that was waiting, typically for another transaction's claim) mean "another
transaction got there first or is still working": retry later. Connection losses mean the
outcome of the transaction is unknown, which the inbox makes safe to retry
(the redelivery finds the evidence or does not). A database that cannot be
reached at all (refused, too many connections, shutting down, an exhausted
connection pool) has done nothing yet: retry later as well. A missing table
(or tenant schema) is a setup mistake: :func:`schema_required` turns it into a
:class:`~inboxguard.errors.ConfigurationError` that says how to create it.

Django's database errors (``django.db.utils``) are read the same way: each
wraps its driver error (its ``__cause__``), which is classified as the
SQLAlchemy error of that driver error would be. Django is never imported.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from inboxguard.errors import ConfigurationError

__all__ = [
    "INBOX_SCHEMA",
    "LEDGER_SCHEMA",
    "OUTBOX_SCHEMA",
    "SchemaHint",
    "is_busy",
    "is_missing_table",
    "is_retryable",
    "is_unreachable",
    "schema_required",
]

#: PostgreSQL: lock_not_available, serialization_failure, deadlock_detected,
#: query_canceled (``statement_timeout`` expired, or a cancel request).
_PG_BUSY = frozenset({"55P03", "40001", "40P01", "57014"})
#: MariaDB/MySQL: lock wait timeout, deadlock, snapshot conflict (1020),
#: MariaDB's ``max_statement_time`` (1969) and MySQL's ``max_execution_time`` (3024).
_MYSQL_BUSY = frozenset({1205, 1213, 1020, 1969, 3024})
#: SQLite primary codes: SQLITE_BUSY, SQLITE_LOCKED.
_SQLITE_BUSY = frozenset({5, 6})
#: PostgreSQL: undefined_table, invalid_schema_name.
_PG_MISSING = frozenset({"42P01", "3F000"})
#: MariaDB/MySQL: no such table, unknown database (a schema).
_MYSQL_MISSING = frozenset({1146, 1049})
#: SQLite's messages for a missing table or attached database.
_SQLITE_MISSING = ("no such table", "unknown database")
#: PostgreSQL: too_many_connections, admin/crash shutdown, cannot_connect_now
#: (class 08, connection exceptions, is matched by its prefix).
_PG_UNREACHABLE = frozenset({"53300", "57P01", "57P02", "57P03"})
#: MariaDB/MySQL: too many connections, max_user_connections, server shutdown,
#: cannot connect (socket, TCP), server gone away, lost connection.
_MYSQL_UNREACHABLE = frozenset({1040, 1203, 1053, 2002, 2003, 2006, 2013})


#: Django's error classes (``django.db.utils``) read as SQLAlchemy's OperationalError.
_DJANGO_OPERATIONAL = frozenset({"OperationalError", "InterfaceError"})


def _as_dbapi(error: BaseException) -> BaseException:
    """A Django database error as SQLAlchemy's error of its driver error, so
    one set of rules classifies both; any other error unchanged."""
    if type(error).__module__ != "django.db.utils" or isinstance(error, DBAPIError):
        return error
    orig = error.__cause__
    if not isinstance(orig, Exception):
        return error
    if type(error).__name__ in _DJANGO_OPERATIONAL:
        return OperationalError(None, None, orig)
    return DBAPIError(None, None, orig)


def is_busy(error: BaseException) -> bool:
    """True when ``error`` is a lock timeout, deadlock, serialization failure or
    statement timeout."""
    error = _as_dbapi(error)
    if not isinstance(error, DBAPIError):
        return False
    orig = error.orig
    module = type(orig).__module__
    if isinstance(orig, sqlite3.Error) or "sqlite" in module:
        errcode = getattr(orig, "sqlite_errorcode", None)
        if errcode is not None:
            return errcode & 0xFF in _SQLITE_BUSY
        return "locked" in str(orig) or "busy" in str(orig)
    if "mysql" in module.lower():  # PyMySQL, mysqlclient, aiomysql: the errno decides
        return _mysql_errno(orig) in _MYSQL_BUSY
    return _pg_code(orig) in _PG_BUSY


def is_unreachable(error: BaseException) -> bool:
    """True when the database could not be reached or took no new connection.

    Covers a refused or dropped connection at connect time (SQLAlchemy
    reports it with ``connection_invalidated`` false, because no pooled
    connection existed yet), "too many connections", a server shutting down,
    and an exhausted connection pool (``sqlalchemy.exc.TimeoutError``).
    """
    if isinstance(error, PoolTimeoutError):
        return True
    error = _as_dbapi(error)
    if not isinstance(error, DBAPIError):
        return False
    orig = error.orig
    module = type(orig).__module__
    if isinstance(orig, sqlite3.Error) or "sqlite" in module:
        return False  # a file: nothing to reach
    if "mysql" in module.lower():
        return _mysql_errno(orig) in _MYSQL_UNREACHABLE
    code = _pg_code(orig)
    if code is None:  # psycopg/psycopg2/asyncpg report a failed connect without SQLSTATE
        return isinstance(error, OperationalError) or isinstance(orig, OSError)
    return code in _PG_UNREACHABLE or str(code).startswith("08")


def is_retryable(error: BaseException) -> bool:
    """True when delivering the same message again later may succeed.

    Covers inboxguard's retryable errors (``InProgressError``,
    ``EffectOutcomeUnknownError``), lock timeouts, deadlocks, serialization
    failures, statement timeouts, lost connections (the commit's outcome is then unknown, and
    the inbox turns a redelivery of a committed command into a duplicate)
    and an unreachable database (:func:`is_unreachable`), whether raised
    through SQLAlchemy or through Django's ORM.
    """
    if getattr(error, "retryable", False) is True:
        return True
    error = _as_dbapi(error)
    if isinstance(error, DBAPIError) and (is_busy(error) or error.connection_invalidated):
        return True
    return is_unreachable(error)


def is_missing_table(error: BaseException) -> bool:
    """True when ``error`` says a table (or the schema holding it) does not exist."""
    error = _as_dbapi(error)
    if not isinstance(error, DBAPIError):
        return False
    orig = error.orig
    module = type(orig).__module__
    if isinstance(orig, sqlite3.Error) or "sqlite" in module:
        return str(orig).startswith(_SQLITE_MISSING)
    if "mysql" in module.lower():
        args: tuple[object, ...] = getattr(orig, "args", ())
        return bool(args) and args[0] in _MYSQL_MISSING
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return code in _PG_MISSING


@dataclass(frozen=True, slots=True)
class SchemaHint:
    """How a service's tables are created: its ``create_schema()`` and its
    Alembic branch (see docs/migrations.md)."""

    #: What the tables hold, e.g. ``"inbox"``.
    what: str
    #: The method that creates them, e.g. ``"Inbox.create_schema()"``.
    create: str
    #: The Alembic branch label of their revisions.
    branch: str

    def error(self, missing: str) -> ConfigurationError:
        """The refusal of a database where ``missing`` does not exist."""
        msg = (
            f"the {self.what} tables are missing: {missing}; create them with"
            f" {self.create}, or with the Alembic revisions (alembic upgrade"
            f" {self.branch}@head, see docs/migrations.md), in the database and schema"
            " the engine or connection points to (its schema_translate_map included)"
        )
        return ConfigurationError(msg)


INBOX_SCHEMA = SchemaHint("inbox", "Inbox.create_schema()", "inboxguard")
OUTBOX_SCHEMA = SchemaHint("outbox", "Outbox.create_schema()", "inboxguard_outbox")
LEDGER_SCHEMA = SchemaHint("effect ledger", "EffectLedger.create_schema()", "inboxguard_effects")


@contextmanager
def schema_required(hint: SchemaHint) -> Iterator[None]:
    """Turn a "table does not exist" database error raised inside the block
    into the :class:`~inboxguard.errors.ConfigurationError` of ``hint``; other
    errors pass unchanged.

    Raises:
        ConfigurationError: a table the block used does not exist.
    """
    try:
        yield
    except DBAPIError as error:
        if not is_missing_table(error):
            raise
        raise hint.error(_first_line(error)) from None


def _first_line(error: DBAPIError) -> str:
    """The database's own words, without the SQL statement and parameters."""
    lines = str(error.orig).strip().splitlines()
    return lines[0] if lines else type(error.orig).__name__


def _pg_code(orig: object) -> str | None:
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return None if code is None else str(code)


def _mysql_errno(orig: object) -> object:
    args: tuple[object, ...] = getattr(orig, "args", ())
    return args[0] if args else None
