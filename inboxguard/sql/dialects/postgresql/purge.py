"""PostgreSQL purge statements.

Features:

- one purger across instances: ``pg_try_advisory_lock`` on a key hashed from
  the table name (session-level, returns at once).
- rows a worker holds are skipped: ``SKIP LOCKED`` inside the one statement
  of each batch, ``DELETE ... WHERE ctid = ANY(ARRAY(SELECT ctid ... SKIP
  LOCKED))``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import Connection, func, literal_column, text
from sqlalchemy.sql import ColumnElement, Select

from inboxguard.sql.dialects.base.purge import PurgeStatements

__all__ = ["PostgresqlPurge"]


class PostgresqlPurge(PurgeStatements):
    """PostgreSQL: an advisory lock, and ``SKIP LOCKED`` inside one statement."""

    single_purger = True
    skips_locked_rows = True
    address = "ctid"

    def lock_key(self, conn: Connection) -> int:
        """The advisory lock's key: a hash of the lock's name on ``conn``."""
        digest = hashlib.sha256(self.lock_name_on(conn).encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    def _match(self, picked: Select[Any]) -> ColumnElement[bool]:
        """``ctid = ANY(ARRAY(SELECT ctid ... SKIP LOCKED))``: a TID scan of the
        picked rows (a key ``IN (subquery)`` is planned as a hash join over the
        whole table once most rows are expired)."""
        ctid: ColumnElement[Any] = literal_column("ctid")
        return ctid == func.any(func.array(picked.with_only_columns(ctid).scalar_subquery()))

    def try_lock(self, conn: Connection) -> bool:
        """``pg_try_advisory_lock``: session-level, returns at once."""
        stmt = text("SELECT pg_try_advisory_lock(:key)")
        return bool(conn.execute(stmt, {"key": self.lock_key(conn)}).scalar())

    def unlock(self, conn: Connection) -> None:
        """``pg_advisory_unlock``."""
        conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": self.lock_key(conn)})
