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

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Executable, update

from inboxguard.outbox._statements import OutboxStatements
from inboxguard.outbox._tables import OutboxTables

__all__ = ["PostgresqlOutbox"]


class PostgresqlOutbox(OutboxStatements):
    """Outbox statements for PostgreSQL."""

    supports_skip_locked = True

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

    def insert(self) -> Executable:
        """``INSERT ... ON CONFLICT DO NOTHING``."""
        return self._insert

    def claim(
        self,
        conn: Connection,
        *,
        now: dt.datetime,
        lease_until: dt.datetime,
        token: str,
        limit: int,
    ) -> Sequence[Sequence[Any]]:
        """Lease in one round trip."""
        params = {"b_now": now, "b_limit": limit, "b_lease": lease_until, "b_token": token}
        rows = conn.execute(self._claim, params).all()
        return sorted((tuple(row) for row in rows), key=lambda row: row[0])
