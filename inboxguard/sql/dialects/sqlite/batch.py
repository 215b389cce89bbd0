"""SQLite batch claim.

Features:

- claim: the stored rows of the batch are read first (one ``SELECT ... IN``
  per 500 keys), so refusals are quarantined before the caller's connection
  takes the write lock; then one ``INSERT ... ON CONFLICT DO NOTHING
  RETURNING command_id`` per 500 absent keys, rows in key order.
- lock wait: the connection's busy timeout is set to ``lock_timeout`` while
  inserting and put back to the caller's value after, as the single claim
  does.
- results: one ``UPDATE ... CASE`` per 500 results.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from inboxguard.sql.dialects.base.batch import (
    BatchStatements,
    CaseResultStore,
    ValuesInsert,
    chunks,
)
from inboxguard.sql.dialects.base.inbox import Claim, Step, Steps
from inboxguard.sql.dialects.sqlite.inbox import busy_bound, within_busy_timeout
from inboxguard.sql.tables import InboxTables

__all__ = ["SqliteBatch"]


class SqliteBatch(BatchStatements):
    """Batch statements for SQLite."""

    reads_first: ClassVar[bool] = True

    def __init__(self, tables: InboxTables, lock_timeout: dt.timedelta | None) -> None:
        super().__init__(tables, lock_timeout)
        self._busy = busy_bound(lock_timeout)
        tail = " ON CONFLICT (consumer, command_id) DO NOTHING RETURNING command_id"
        self._insert = ValuesInsert(tables, head="", verb="INSERT", tail=tail)
        self._results = CaseResultStore(tables)

    def claim(
        self, shared: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
    ) -> Steps[dict[str, Claim]]:
        """Insert each chunk; a key not inserted is left for :meth:`read`."""
        return (yield from within_busy_timeout(self._busy, self._insert_all(shared, rows)))

    def _insert_all(
        self, shared: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
    ) -> Steps[dict[str, Claim]]:
        found: dict[str, Claim] = {}
        for part in chunks(rows):
            inserted = set((yield self._insert.step(shared, part)).scalars())
            found.update(
                (r["command_id"], Claim(True, r["digest"]))
                for r in part
                if r["command_id"] in inserted
            )
        return found

    def store_results(self, consumer: str, results: Sequence[tuple[str, str]]) -> list[Step]:
        """One ``UPDATE ... CASE`` per chunk."""
        return self._results.steps(consumer, results)
