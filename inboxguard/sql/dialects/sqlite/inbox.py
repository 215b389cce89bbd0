"""SQLite inbox statements: the claim, the result store, the quarantine upsert.

Features:

- claim: ``SELECT`` the stored row first, then ``INSERT ... ON CONFLICT DO
  NOTHING`` when absent. Reading first keeps the caller's connection free of a
  write lock when the command turns out to be a duplicate or a mismatch, so
  the quarantine record can be written on another connection.
- lock wait: SQLite locks the whole database. Around the insert, the guard
  sets the connection's busy timeout to ``lock_timeout`` (``PRAGMA
  busy_timeout``, in process, no round trip) and then puts the caller's
  value back, also when the insert fails, so the block and the pooled
  connection wait as long as the caller configured. A writer that waits
  longer fails with "database is locked", reported as retryable.
- one writer at a time: concurrent claims serialize on the database lock.
- ``FOR UPDATE SKIP LOCKED``: no.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Mapping
from typing import Any, TypeVar

from sqlalchemy import Executable, TextClause, bindparam, text
from sqlalchemy.dialects.sqlite import insert
from sqlalchemy.exc import DBAPIError

from inboxguard.sql.dialects.base.inbox import Claim, InboxStatements, Steps, on_conflict_quarantine
from inboxguard.sql.table_text import table_text
from inboxguard.sql.tables import InboxTables
from inboxguard.sql.types import UtcDateTime

__all__ = ["SqliteInbox", "busy_bound", "within_busy_timeout"]

_T = TypeVar("_T")
_READ_BUSY = text("PRAGMA busy_timeout")


def busy_bound(lock_timeout: dt.timedelta | None) -> TextClause | None:
    """The statement that bounds the connection's lock wait to ``lock_timeout``."""
    if lock_timeout is None:
        return None
    return text(f"PRAGMA busy_timeout = {int(lock_timeout.total_seconds() * 1000)}")


@functools.lru_cache(maxsize=16)
def _set_busy(millis: int) -> TextClause:
    return text(f"PRAGMA busy_timeout = {millis}")


def within_busy_timeout(bound: TextClause | None, steps: Steps[_T]) -> Steps[_T]:
    """Run ``steps`` with the connection's busy timeout set by ``bound``, then
    put the caller's value back, also when a step raised (the error then
    passes on unchanged)."""
    if bound is None:
        return (yield from steps)
    caller = int((yield _READ_BUSY, {}).scalar_one())
    yield bound, {}
    try:
        value = yield from steps
    except DBAPIError:
        yield _set_busy(caller), {}
        raise
    yield _set_busy(caller), {}
    return value


class SqliteInbox(InboxStatements):
    """Inbox statements for SQLite."""

    def __init__(self, tables: InboxTables, lock_timeout: dt.timedelta | None) -> None:
        super().__init__(tables, lock_timeout)
        inbox = tables.inbox
        self._busy_stmt = busy_bound(lock_timeout)
        # SQL text so the compiled form is cached: SQLAlchemy 2.0 does not cache
        # the dialect-specific insert() constructs (sqlalchemy/sqlalchemy#10445).
        self._insert_stmt = table_text(
            "INSERT INTO {inbox}"
            " (consumer, command_id, digest, processed_at, expires_at, result_expires_at)"
            " VALUES (:consumer, :command_id, :digest, :processed_at, :expires_at,"
            " :result_expires_at) ON CONFLICT (consumer, command_id) DO NOTHING",
            inbox=inbox,
        ).bindparams(
            bindparam("processed_at", type_=UtcDateTime()),
            bindparam("expires_at", type_=UtcDateTime()),
            bindparam("result_expires_at", type_=UtcDateTime()),
        )
        self._quarantine_stmt = on_conflict_quarantine(insert, tables.quarantine)

    def attempt(self, params: Mapping[str, Any]) -> Steps[Claim | None]:
        """Read first; insert only when nothing is stored."""
        row = (yield self.lookup_stmt, params).first()
        if row is not None:
            return self.existing(row)
        inserted = yield from within_busy_timeout(self._busy_stmt, self._insert(params))
        if inserted:
            return Claim(True, params["digest"])
        row = (yield self.lookup_stmt, params).first()
        return None if row is None else self.existing(row)

    def _insert(self, params: Mapping[str, Any]) -> Steps[bool]:
        return bool((yield self._insert_stmt, params).rowcount == 1)  # type: ignore[attr-defined]

    def upsert_quarantine(self) -> Executable:
        """``INSERT ... ON CONFLICT DO UPDATE`` counting occurrences."""
        return self._quarantine_stmt
