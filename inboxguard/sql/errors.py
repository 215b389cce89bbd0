"""The one place that classifies database errors from the drivers.

Lock timeouts, deadlocks and serialization failures mean "another transaction
got there first or is still working": retry later. Connection losses mean the
outcome of the transaction is unknown, which the inbox makes safe to retry
(the redelivery finds the evidence or does not).
"""

from __future__ import annotations

import sqlite3

from sqlalchemy.exc import DBAPIError

__all__ = ["is_busy", "is_retryable"]

#: PostgreSQL: lock_not_available, serialization_failure, deadlock_detected.
_PG_BUSY = frozenset({"55P03", "40001", "40P01"})
#: MariaDB/MySQL: lock wait timeout, deadlock, snapshot conflict (1020).
_MYSQL_BUSY = frozenset({1205, 1213, 1020})
#: SQLite primary codes: SQLITE_BUSY, SQLITE_LOCKED.
_SQLITE_BUSY = frozenset({5, 6})


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
        args: tuple[object, ...] = getattr(orig, "args", ())
        return bool(args) and args[0] in _MYSQL_BUSY
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return code in _PG_BUSY


def is_retryable(error: BaseException) -> bool:
    """True when delivering the same message again later may succeed.

    Covers inboxguard's retryable errors (``InProgressError``,
    ``EffectOutcomeUnknownError``), lock timeouts, deadlocks, serialization
    failures and lost connections (the commit's outcome is then unknown, and
    the inbox turns a redelivery of a committed command into a duplicate).
    """
    if getattr(error, "retryable", False) is True:
        return True
    if isinstance(error, DBAPIError):
        return is_busy(error) or bool(error.connection_invalidated)
    return False
