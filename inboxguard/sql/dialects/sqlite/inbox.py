"""SQLite inbox statements: the claim, the result store, the quarantine upsert.

Features:

- claim: ``SELECT`` the stored row first, then ``INSERT ... ON CONFLICT DO
  NOTHING`` when absent. Reading first keeps the caller's connection free of a
  write lock when the command turns out to be a duplicate or a mismatch, so
  the quarantine record can be written on another connection.
- lock wait: SQLite locks the whole database. Before inserting, the guard sets
  the connection's busy timeout to ``lock_timeout`` (``PRAGMA busy_timeout``,
  in process, no round trip); the setting stays on the pooled connection. A
  writer that waits longer fails with "database is locked", reported as
  retryable.
- one writer at a time: concurrent claims serialize on the database lock.
- ``FOR UPDATE SKIP LOCKED``: no.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Executable, bindparam, text
from sqlalchemy.dialects.sqlite import insert

from inboxguard.sql.dialects.base.inbox import Claim, Dialect, Steps, on_conflict_quarantine
from inboxguard.sql.table_text import table_text
from inboxguard.sql.tables import InboxTables
from inboxguard.sql.types import UtcDateTime

__all__ = ["SqliteDialect"]


class SqliteDialect(Dialect):
    """Inbox statements for SQLite."""

    def __init__(self, tables: InboxTables, lock_timeout: dt.timedelta | None) -> None:
        super().__init__(tables, lock_timeout)
        inbox = tables.inbox
        self._busy_stmt = None
        if lock_timeout is not None:
            millis = int(lock_timeout.total_seconds() * 1000)
            self._busy_stmt = text(f"PRAGMA busy_timeout = {millis}")
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
        if self._busy_stmt is not None:
            yield self._busy_stmt, {}
        if (yield self._insert_stmt, params).rowcount == 1:  # type: ignore[attr-defined]
            return Claim(True, params["digest"])
        row = (yield self.lookup_stmt, params).first()
        return None if row is None else self.existing(row)

    def upsert_quarantine(self) -> Executable:
        """``INSERT ... ON CONFLICT DO UPDATE`` counting occurrences."""
        return self._quarantine_stmt
