"""MariaDB and MySQL batch claim.

Features:

- claim (MariaDB 10.5+): one multi-row ``INSERT IGNORE ... RETURNING command_id``
  per 500 keys, rows in key order; the keys it did not insert are then read
  with one locking read (``LOCK IN SHARE MODE``, so REPEATABLE READ snapshots
  never hide a commit). A batch of new commands costs one statement.
- claim (MySQL, and MariaDB before 10.5: no ``INSERT ... RETURNING``): the
  single claim, key by key in key order. The choice follows SQLAlchemy's
  ``insert_returning``, which it sets on connecting from the server's version.
- lock wait: on MariaDB bounded per statement with ``SET STATEMENT
  innodb_lock_wait_timeout=N FOR`` (whole seconds, rounded up). A timeout
  (1205) or deadlock (1213) refuses the whole batch as in progress.
- results: one ``UPDATE ... CASE`` per 500 results.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Dialect as SaDialect

from inboxguard.sql.dialects.base.batch import (
    BatchStatements,
    CaseResultStore,
    ValuesInsert,
    chunks,
)
from inboxguard.sql.dialects.base.inbox import Claim, InboxStatements, Step, Steps
from inboxguard.sql.dialects.mysql.inbox import MysqlInbox
from inboxguard.sql.tables import InboxTables

__all__ = ["MysqlBatch"]


class MysqlBatch(BatchStatements):
    """Batch statements for MariaDB (and, key by key, MySQL and MariaDB before 10.5)."""

    def __init__(
        self,
        tables: InboxTables,
        lock_timeout: dt.timedelta | None,
        *,
        is_mariadb: bool = True,
        returning: bool | None = None,
    ) -> None:
        super().__init__(tables, lock_timeout)
        self.is_mariadb = is_mariadb
        self.returning = is_mariadb if returning is None else returning
        self._prefix = ""
        if is_mariadb and lock_timeout is not None:
            seconds = math.ceil(lock_timeout.total_seconds())
            self._prefix = f"SET STATEMENT innodb_lock_wait_timeout={seconds} FOR "
        self._locking_read = self._read.with_for_update(read=True)
        self._single = MysqlInbox(tables, lock_timeout, is_mariadb=is_mariadb)
        tail = " RETURNING command_id"
        self._insert = ValuesInsert(tables, head=self._prefix, verb="INSERT IGNORE", tail=tail)
        self._results = CaseResultStore(tables)

    @classmethod
    def for_dialect(
        cls, sa_dialect: SaDialect, tables: InboxTables, lock_timeout: dt.timedelta | None
    ) -> BatchStatements:
        """One ``INSERT ... RETURNING`` per chunk where the server has it
        (MariaDB 10.5+); key by key where it has not (MySQL, older MariaDB)."""
        is_mariadb = bool(getattr(sa_dialect, "is_mariadb", False))
        returning = bool(getattr(sa_dialect, "insert_returning", False))
        return cls(tables, lock_timeout, is_mariadb=is_mariadb, returning=returning)

    def claim(
        self, shared: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
    ) -> Steps[dict[str, Claim]]:
        """Insert-ignore each chunk, then read the keys it did not insert."""
        if not self.returning:
            return (yield from self._key_by_key(shared, rows))
        found: dict[str, Claim] = {}
        for part in chunks(rows):
            inserted = set((yield self._insert.step(shared, part)).scalars())
            found.update(
                (r["command_id"], Claim(True, r["digest"]))
                for r in part
                if r["command_id"] in inserted
            )
            others = [r["command_id"] for r in part if r["command_id"] not in inserted]
            if others:
                result = yield self._locking_read, {"consumer": shared["consumer"], "ids": others}
                found.update((row.command_id, InboxStatements.existing(row)) for row in result)
        return found

    def read_step(self, consumer: str, keys: Sequence[str]) -> Step:
        """A locking read: a snapshot never hides a commit."""
        return self._locking_read, {"consumer": consumer, "ids": list(keys)}

    def store_results(self, consumer: str, results: Sequence[tuple[str, str]]) -> list[Step]:
        """One ``UPDATE ... CASE`` per chunk (matched rows are counted)."""
        return self._results.steps(consumer, results)

    def _key_by_key(
        self, shared: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
    ) -> Steps[dict[str, Claim]]:
        found: dict[str, Claim] = {}
        for row in rows:
            key = {"key_consumer": shared["consumer"], "key_command_id": row["command_id"]}
            claim = yield from self._single.attempt({**shared, **row, **key})
            if claim is not None:
                found[row["command_id"]] = claim
        return found
