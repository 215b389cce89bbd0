"""Outbox statements for MariaDB (10.6+) and MySQL (8.0+).

Features:

- add: ``INSERT IGNORE`` (every value is validated before it is bound); a
  taken ID is read back with ``LOCK IN SHARE MODE`` so a REPEATABLE READ
  snapshot cannot hide a concurrent commit.
- claim: two statements in one short transaction, ``SELECT ... ORDER BY
  due_at LIMIT n FOR UPDATE SKIP LOCKED`` then ``UPDATE ... WHERE id IN
  (...)`` (MariaDB refuses ``LIMIT`` inside an ``IN`` subquery). The
  dispatcher claims under READ COMMITTED, which takes no gap locks, so
  producers inserting new rows never wait for a claim.
- polling index: ``(due_at)``; finished rows hold NULL and fall outside the
  range the claim scans.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, Executable, bindparam, delete, update

from inboxguard.sql.dialects.base.outbox import OutboxStatements
from inboxguard.sql.dialects.mysql.charset import require_utf8mb4
from inboxguard.sql.tables import OutboxTables

__all__ = ["MysqlOutbox"]

#: Position of ``attempts`` in ``claim_columns``.
_ATTEMPTS = 7


class MysqlOutbox(OutboxStatements):
    """Outbox statements for MariaDB and MySQL."""

    #: READ COMMITTED takes no gap locks, so producers never wait for a claim.
    claim_isolation_level = "READ COMMITTED"

    def __init__(self, tables: OutboxTables) -> None:
        super().__init__(tables)
        t = self.table
        self._insert = self.insert_text(verb="INSERT IGNORE")
        self._pick = self.due_rows.with_for_update(skip_locked=True)
        self._lease = (
            update(t)
            .where(t.c.id.in_(bindparam("b_ids", expanding=True)))
            .values(self.lease_values())
        )
        self._lookup = self.lookup_digest.with_for_update(read=True)  # type: ignore[attr-defined]

    def insert(self) -> Executable:
        """``INSERT IGNORE``."""
        return self._insert

    def add_row(self, conn: Connection, values: dict[str, Any]) -> bool:
        """``INSERT IGNORE`` and its row count (MariaDB has no usable RETURNING here),
        on a utf8mb4 connection only (IGNORE would hide a lossy conversion)."""
        require_utf8mb4(conn.dialect)
        return bool(conn.execute(self._insert, values).rowcount == 1)

    def lookup_for_compare(self) -> Executable:
        """A locking read, which sees the latest committed row."""
        return self._lookup  # type: ignore[no-any-return]

    def bounded_update(
        self, where: ColumnElement[bool], limit: int, values: dict[str, Any]
    ) -> Executable:
        """``UPDATE ... LIMIT n`` (MariaDB refuses LIMIT in an IN subquery)."""
        return (
            update(self.table).where(where).values(values).with_dialect_options(mysql_limit=limit)
        )

    def bounded_delete(self, where: ColumnElement[bool], limit: int) -> Executable:
        """``DELETE ... LIMIT n``."""
        return delete(self.table).where(where).with_dialect_options(mysql_limit=limit)

    def claim(
        self,
        conn: Connection,
        *,
        now: dt.datetime,
        lease_until: dt.datetime,
        token: str,
        limit: int,
    ) -> Sequence[Sequence[Any]]:
        """Lock due rows with SKIP LOCKED, then lease them."""
        rows = conn.execute(self._pick, {"b_now": now, "b_limit": limit}).all()
        if not rows:
            return []
        ids = [row[0] for row in rows]
        conn.execute(self._lease, {"b_ids": ids, "b_lease": lease_until, "b_token": token})
        out = []
        for row in rows:
            values = list(row)
            values[_ATTEMPTS] += 1
            out.append(tuple(values))
        return out
