"""Outbox statements for SQLite.

Features:

- add: ``INSERT ... ON CONFLICT (command_id) DO NOTHING``.
- claim: one ``UPDATE ... WHERE id IN (SELECT ... LIMIT n) RETURNING ...``;
  SQLite has no ``SKIP LOCKED`` and one writer at a time, so the statement is
  atomic but dispatchers would queue behind each other's writes.
- one dispatcher per database: a second dispatcher on the same database
  file is refused (an advisory file lock held while the dispatcher runs).
"""

from __future__ import annotations

from sqlalchemy import update

from inboxguard.sql.dialects.base.outbox import ReturningOutboxStatements
from inboxguard.sql.tables import OutboxTables

__all__ = ["SqliteOutbox"]


class SqliteOutbox(ReturningOutboxStatements):
    """Outbox statements for SQLite."""

    concurrent_dispatchers = False

    def __init__(self, tables: OutboxTables) -> None:
        super().__init__(tables)
        t = self.table
        self._insert = self.insert_text(suffix=" ON CONFLICT (command_id) DO NOTHING RETURNING id")
        pick = self.due_rows.with_only_columns(t.c.id).scalar_subquery()
        self._claim = (
            update(t)
            .where(t.c.id.in_(pick))
            .values(self.lease_values())
            .returning(*self.claim_columns)
        )
