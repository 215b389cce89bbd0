"""Outbox statements for PostgreSQL.

Features:

- add: ``INSERT ... ON CONFLICT (command_id) DO NOTHING``; a taken ID is read
  back to compare digests.
- claim: one statement, ``UPDATE ... WHERE id IN (SELECT ... ORDER BY due_at
  LIMIT n FOR UPDATE SKIP LOCKED) RETURNING ...``; concurrent dispatchers skip
  each other's rows instead of waiting.
- polling index: partial, ``(due_at) WHERE due_at IS NOT NULL``: it holds the
  backlog only, however many delivered rows the table keeps.
- wake-up: ``NOTIFY`` in the producer's transaction (sent on commit),
  ``LISTEN`` in the dispatcher.
"""

from __future__ import annotations

from sqlalchemy import Executable, func, select, update

from inboxguard.sql.dialects.base.outbox import ReturningOutboxStatements
from inboxguard.sql.tables import OutboxTables

__all__ = ["PostgresqlOutbox"]


class PostgresqlOutbox(ReturningOutboxStatements):
    """Outbox statements for PostgreSQL."""

    supports_notify = True

    def __init__(self, tables: OutboxTables) -> None:
        super().__init__(tables)
        t = self.table
        self._insert = self.insert_text(suffix=" ON CONFLICT (command_id) DO NOTHING RETURNING id")
        pick = (
            self.due_rows.with_only_columns(t.c.id)
            .with_for_update(skip_locked=True)
            .scalar_subquery()
        )
        self._claim = (
            update(t)
            .where(t.c.id.in_(pick))
            .values(self.lease_values())
            .returning(*self.claim_columns)
        )

    def notify(self, channel: str) -> Executable:
        """``SELECT pg_notify(channel, '')``: delivered to listeners on commit."""
        return select(func.pg_notify(channel, ""))

    def listen(self, channel: str) -> str:
        """``LISTEN "channel"``, sent on a dispatcher's own driver connection."""
        return f'LISTEN "{channel}"'
