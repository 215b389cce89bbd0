"""MariaDB and MySQL inbox statements: the claim, the result store, the
quarantine upsert and the watermark advance.

Features:

- claim: ``INSERT IGNORE`` (safe here: every value is validated before it is
  bound), then, only when nothing was inserted, a locking read of the stored
  row (``LOCK IN SHARE MODE``) so REPEATABLE READ snapshots never hide a
  commit. A duplicate costs two round trips.
- lock wait: on MariaDB bounded per statement with ``SET STATEMENT
  innodb_lock_wait_timeout=N FOR ...`` (whole seconds, rounded up; error 1205
  on expiry); on MySQL the server's ``innodb_lock_wait_timeout`` applies.
- isolation: REPEATABLE READ (the default) and READ COMMITTED; deadlocks
  (1213) are reported as retryable.
- identities use the ``utf8mb4_bin`` collation: the default collations fold
  case. Because ``utf8mb4_bin`` pads with spaces, IDs with trailing whitespace
  are refused before they reach the database.
- ``FOR UPDATE SKIP LOCKED``: MariaDB 10.6+, MySQL 8.0+.
- watermark: a conditional ``UPDATE`` (a locking current read), then, for a
  new key, ``INSERT IGNORE``.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Executable, Table, bindparam
from sqlalchemy.dialects.mysql import insert
from sqlalchemy.engine import Dialect as SaDialect

from inboxguard.sql.dialects.base.inbox import Claim, InboxStatements, Steps, Watermark
from inboxguard.sql.table_text import table_text
from inboxguard.sql.tables import InboxTables
from inboxguard.sql.types import UtcDateTime

__all__ = ["MysqlInbox", "MysqlWatermark"]


class MysqlInbox(InboxStatements):
    """Inbox statements for MariaDB and MySQL."""

    def __init__(
        self, tables: InboxTables, lock_timeout: dt.timedelta | None, *, is_mariadb: bool = True
    ) -> None:
        super().__init__(tables, lock_timeout)
        prefix = ""
        if is_mariadb and lock_timeout is not None:
            seconds = math.ceil(lock_timeout.total_seconds())
            prefix = f"SET STATEMENT innodb_lock_wait_timeout={seconds} FOR "
        # SQL text: MariaDB's per-statement SET STATEMENT has no Core construct,
        # and text keeps the compiled form cached.
        self._insert_stmt = table_text(
            f"{prefix}INSERT IGNORE INTO {{inbox}}"
            " (consumer, command_id, digest, processed_at, expires_at, result_expires_at)"
            " VALUES (:consumer, :command_id, :digest, :processed_at, :expires_at,"
            " :result_expires_at)",
            inbox=tables.inbox,
        ).bindparams(
            bindparam("processed_at", type_=UtcDateTime()),
            bindparam("expires_at", type_=UtcDateTime()),
            bindparam("result_expires_at", type_=UtcDateTime()),
        )
        self._locking_lookup = self.lookup_stmt.with_for_update(read=True)
        q = tables.quarantine
        upsert = insert(q)
        self._quarantine_stmt = upsert.on_duplicate_key_update(
            occurrences=q.c.occurrences + 1,
            last_seen_at=upsert.inserted.last_seen_at,
            status="open",
            details=upsert.inserted.details,
        )

    @classmethod
    def for_dialect(
        cls, sa_dialect: SaDialect, tables: InboxTables, lock_timeout: dt.timedelta | None
    ) -> InboxStatements:
        """MariaDB bounds the lock wait per statement; MySQL cannot."""
        is_mariadb = bool(getattr(sa_dialect, "is_mariadb", False))
        return cls(tables, lock_timeout, is_mariadb=is_mariadb)

    def attempt(self, params: Mapping[str, Any]) -> Steps[Claim | None]:
        """Insert-ignore, then a locking read when the row was already there."""
        if (yield self._insert_stmt, params).rowcount == 1:  # type: ignore[attr-defined]
            return Claim(True, params["digest"])
        row = (yield self._locking_lookup, params).first()
        return None if row is None else self.existing(row)

    def upsert_quarantine(self) -> Executable:
        """``INSERT ... ON DUPLICATE KEY UPDATE`` counting occurrences."""
        return self._quarantine_stmt


class MysqlWatermark(Watermark):
    """A conditional ``UPDATE``, then ``INSERT IGNORE`` for a new key."""

    def __init__(self, table: Table) -> None:
        super().__init__(table)
        # Every value is bound; the table is rendered quoted and schema-translated.
        self._raise = table_text(
            "UPDATE {watermark} SET position = :position, updated_at = :updated_at"
            " WHERE consumer = :consumer AND `key` = :key AND position < :position",
            watermark=table,
        ).bindparams(self.updated_at)
        self._insert_ignore = table_text(
            "INSERT IGNORE INTO {watermark} (consumer, `key`, position, updated_at)"
            " VALUES (:consumer, :key, :position, :updated_at)",
            watermark=table,
        ).bindparams(self.updated_at)

    def advance(self, values: Mapping[str, Any]) -> Steps[bool]:
        """Raise, else insert; if the insert lost a race, raise once more.

        The driver reports *matched* rows and the WHERE only matches a lower
        position, so a count of 1 means it advanced. (``ON DUPLICATE KEY
        UPDATE`` cannot tell "inserted" from "unchanged" under that flag.)
        """
        if (yield self._raise, values).rowcount:  # type: ignore[attr-defined]
            return True
        if (yield self._insert_ignore, values).rowcount:  # type: ignore[attr-defined]
            return True
        return bool((yield self._raise, values).rowcount)  # type: ignore[attr-defined]
