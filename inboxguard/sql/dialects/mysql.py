"""MariaDB and MySQL (PyMySQL).

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
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Executable, bindparam, text
from sqlalchemy.dialects.mysql import insert

from inboxguard.sql.dialects.base import Claim, ClaimSteps, Dialect
from inboxguard.sql.schema import InboxTables, UtcDateTime

__all__ = ["MysqlDialect"]


class MysqlDialect(Dialect):
    """Inbox statements for MariaDB and MySQL."""

    names = ("mysql", "mariadb")
    supports_skip_locked = True

    def __init__(
        self, tables: InboxTables, lock_timeout: dt.timedelta | None, *, is_mariadb: bool = True
    ) -> None:
        super().__init__(tables, lock_timeout)
        name = tables.inbox.name
        prefix = ""
        if is_mariadb and lock_timeout is not None:
            seconds = math.ceil(lock_timeout.total_seconds())
            prefix = f"SET STATEMENT innodb_lock_wait_timeout={seconds} FOR "
        # SQL text: MariaDB's per-statement SET STATEMENT has no Core construct,
        # and text keeps the compiled form cached.
        self._insert_stmt = text(
            f"{prefix}INSERT IGNORE INTO {name}"
            " (consumer, command_id, digest, processed_at, expires_at, result_expires_at)"
            " VALUES (:consumer, :command_id, :digest, :processed_at, :expires_at,"
            " :result_expires_at)"
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

    def claim(self, params: Mapping[str, Any]) -> ClaimSteps:
        """Insert-ignore, then a locking read when the row was already there."""
        if (yield self._insert_stmt, params).rowcount == 1:  # type: ignore[attr-defined]
            return Claim(True, params["digest"])
        row = (yield self._locking_lookup, params).first()
        if row is None:  # pragma: no cover - the conflicting row vanished (purged)
            return (yield from self.claim(params))
        return self.existing(row)

    def upsert_quarantine(self) -> Executable:
        """``INSERT ... ON DUPLICATE KEY UPDATE`` counting occurrences."""
        return self._quarantine_stmt
