"""The one place that classifies database errors from the drivers.

Lock timeouts, deadlocks and serialization failures mean "another transaction
got there first or is still working": retry later. Connection losses mean the
outcome of the transaction is unknown, which the inbox makes safe to retry
(the redelivery finds the evidence or does not). A database that cannot be
reached at all (refused, too many connections, shutting down, an exhausted
connection pool) has done nothing yet: retry later as well.
"""

from __future__ import annotations

import sqlite3

from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

__all__ = ["is_busy", "is_retryable", "is_unreachable"]

#: PostgreSQL: lock_not_available, serialization_failure, deadlock_detected.
_PG_BUSY = frozenset({"55P03", "40001", "40P01"})
#: MariaDB/MySQL: lock wait timeout, deadlock, snapshot conflict (1020).
_MYSQL_BUSY = frozenset({1205, 1213, 1020})
#: SQLite primary codes: SQLITE_BUSY, SQLITE_LOCKED.
_SQLITE_BUSY = frozenset({5, 6})
#: PostgreSQL: too_many_connections, admin/crash shutdown, cannot_connect_now
#: (class 08, connection exceptions, is matched by its prefix).
_PG_UNREACHABLE = frozenset({"53300", "57P01", "57P02", "57P03"})
#: MariaDB/MySQL: too many connections, max_user_connections, server shutdown,
#: cannot connect (socket, TCP), server gone away, lost connection.
_MYSQL_UNREACHABLE = frozenset({1040, 1203, 1053, 2002, 2003, 2006, 2013})


def is_busy(error: BaseException) -> bool:
    """True when ``error`` is a lock timeout, deadlock or serialization failure."""
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
    failures, lost connections (the commit's outcome is then unknown, and
    the inbox turns a redelivery of a committed command into a duplicate)
    and an unreachable database (:func:`is_unreachable`).
    """
    if getattr(error, "retryable", False) is True:
        return True
    if isinstance(error, DBAPIError) and (is_busy(error) or error.connection_invalidated):
        return True
    return is_unreachable(error)


def _pg_code(orig: object) -> str | None:
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return None if code is None else str(code)


def _mysql_errno(orig: object) -> object:
    args: tuple[object, ...] = getattr(orig, "args", ())
    return args[0] if args else None
