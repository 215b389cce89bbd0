"""The PostgreSQL claim on a partitioned inbox (``Inbox(partitioning=...)``).

Features:

- uniqueness across partitions: PostgreSQL enforces ``(consumer,
  command_id)`` only inside each partition. The claim therefore takes
  ``pg_advisory_xact_lock`` on a hash of (inbox table, consumer, command ID)
  in a statement of its own, then inserts only when no partition holds the
  command (``INSERT ... SELECT ... WHERE NOT EXISTS``). A second claimer of the
  same command waits on the lock until the first transaction ends; its next
  statement takes a new snapshot (READ COMMITTED) and sees the committed row
  in whatever partition its expiry put it.
- isolation: READ COMMITTED only. Under REPEATABLE READ or SERIALIZABLE the
  snapshot is taken at the transaction's first statement, before the lock
  is granted, so a row committed meanwhile in another partition would stay
  invisible and the command could be claimed twice: the claim refuses with
  :class:`~inboxguard.ConfigurationError` before inserting anything.
- lock wait: the advisory lock is bounded by ``lock_timeout`` the way the
  unpartitioned claim bounds its insert (SQLSTATE 55P03 on expiry).
- cost: two round trips per claim; the lookup of the stored row probes the
  unique index of every partition once (no partition pruning without the
  expiry) and serves both the ``NOT EXISTS`` and the duplicate's answer.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from sqlalchemy import bindparam, text

from inboxguard.errors import ConfigurationError
from inboxguard.sql.dialects.base.inbox import Claim, Steps
from inboxguard.sql.dialects.postgresql.inbox import PostgresqlInbox, claim_text
from inboxguard.sql.dialects.postgresql.partitions import claim_lock_seed
from inboxguard.sql.tables import InboxTables
from inboxguard.sql.types import id_type

__all__ = ["PartitionedPostgresqlInbox", "claims_at"]

_SAFE_ISOLATION = "read committed"


class PartitionedPostgresqlInbox(PostgresqlInbox):
    """Inbox statements for a partitioned PostgreSQL inbox: lock, then claim."""

    def __init__(self, tables: InboxTables, lock_timeout: dt.timedelta | None) -> None:
        super().__init__(tables, lock_timeout)
        keyed = (
            bindparam("key_consumer", type_=id_type()),
            bindparam("key_command_id", type_=id_type()),
        )
        self._lock_stmt = text(
            _lock_sql(claim_lock_seed(tables.inbox.name), lock_timeout)
        ).bindparams(*keyed)
        self._claim_stmt = claim_text(_CLAIM_SQL, tables, *keyed)

    def attempt(self, params: Mapping[str, Any]) -> Steps[Claim | None]:
        """Take the command's advisory lock, refuse a snapshot older than the
        lock, then claim across every partition."""
        isolation = (yield self._lock_stmt, params).scalar()
        if not claims_at(isolation):
            raise _isolation_error(isolation)
        row = (yield self._claim_stmt, params).first()
        if row is not None:
            return Claim(True, row[0]) if row[3] else Claim(False, row[0], row[1], row[2])
        row = (yield self.lookup_stmt, params).first()
        return None if row is None else self.existing(row)


def claims_at(isolation: object) -> bool:
    """Whether the partitioned claim runs in a transaction at ``isolation``
    (READ COMMITTED only; PostgreSQL's or SQLAlchemy's spelling)."""
    return str(isolation).lower() == _SAFE_ISOLATION


def _isolation_error(isolation: object) -> ConfigurationError:
    msg = (
        f"a partitioned inbox (Inbox(partitioning=...)) claims only under READ COMMITTED,"
        f" but this transaction runs at {str(isolation).upper()}: its snapshot can predate"
        " another worker's claim of the same command in another partition, so the command"
        " could be applied twice. Nothing was claimed; roll back, and run the guarded"
        " transaction at READ COMMITTED (e.g."
        " session.connection(execution_options={'isolation_level': 'READ COMMITTED'})"
        " or create_engine(..., isolation_level='READ COMMITTED')), or drop partitioning"
    )
    return ConfigurationError(msg)


def _lock_sql(seed: int, lock_timeout: dt.timedelta | None) -> str:
    """Take the command's transaction-scoped advisory lock; return the
    transaction's isolation level. With a lock timeout, the wait is bounded and
    the caller's own ``lock_timeout`` is put back once the lock is granted."""
    key = f"hashtextextended(:key_consumer || chr(31) || :key_command_id, {seed})"
    if lock_timeout is None:
        return (
            "SELECT current_setting('transaction_isolation') AS isolation"
            f" FROM (SELECT pg_advisory_xact_lock({key})) AS locked"
        )
    millis = max(1, int(lock_timeout.total_seconds() * 1000))
    return (
        "WITH prev AS MATERIALIZED (SELECT current_setting('lock_timeout') AS v),"
        f" locked AS MATERIALIZED (SELECT pg_advisory_xact_lock({key}) AS l FROM prev"
        f" WHERE set_config('lock_timeout', '{millis}', true) IS NOT NULL)"
        " SELECT current_setting('transaction_isolation') AS isolation,"
        " set_config('lock_timeout', (SELECT v FROM prev), true) AS restored FROM locked"
    )


#: Insert only when no partition holds the command; else return the stored row.
#: ``stored`` probes every partition once and serves both the check and the answer.
_CLAIM_SQL = (
    "WITH stored AS MATERIALIZED (SELECT digest, result, result_expires_at FROM {inbox}"
    " WHERE consumer = :key_consumer AND command_id = :key_command_id),"
    " claimed AS (INSERT INTO {inbox}"
    " (consumer, command_id, digest, processed_at, expires_at, result_expires_at)"
    " SELECT :consumer, :command_id, :digest, :processed_at, :expires_at, :result_expires_at"
    " WHERE NOT EXISTS (SELECT 1 FROM stored)"
    " ON CONFLICT DO NOTHING RETURNING digest)"
    " SELECT digest, NULL AS result, NULL AS result_expires_at, true AS fresh FROM claimed"
    " UNION ALL"
    " SELECT digest, result, result_expires_at, false FROM stored"
)
