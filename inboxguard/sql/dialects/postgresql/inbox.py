"""PostgreSQL inbox statements: the claim, the result store, the quarantine upsert.

Features:

- claim and result store: one statement each, run on the caller's DBAPI cursor
  where :mod:`inboxguard.sql.direct` allows.
- claim: one statement (kept as SQL text so its compiled form is cached). A
  data-modifying CTE runs ``INSERT ... ON CONFLICT DO
  NOTHING RETURNING`` and, when nothing was inserted, reads the stored row in
  the same round trip. Only when the conflicting row was committed after the
  statement's snapshot (a lost race) does a second ``SELECT`` follow.
- lock wait: bounded by ``lock_timeout``, set with ``set_config(..., true)``
  inside the same statement and put back to the caller's value by the same
  statement once the insert has finished waiting (SQLSTATE 55P03 on expiry,
  which aborts the transaction anyway).
- isolation: READ COMMITTED, REPEATABLE READ and SERIALIZABLE. Under the last
  two, a race lost to a concurrent commit is a serialization failure (40001),
  reported as retryable, never a silent skip.
- ``FOR UPDATE SKIP LOCKED``: yes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from sqlalchemy import BindParameter, Boolean, Executable, Integer, bindparam, column
from sqlalchemy.dialects.postgresql import insert

from inboxguard.sql.dialects.base.inbox import Claim, Dialect, Steps, on_conflict_quarantine
from inboxguard.sql.direct import DirectSelect, direct
from inboxguard.sql.table_text import table_text
from inboxguard.sql.tables import InboxTables
from inboxguard.sql.types import UtcDateTime, digest_type, id_type, long_text

__all__ = ["PostgresqlDialect", "claim_text"]


class PostgresqlDialect(Dialect):
    """Inbox statements for PostgreSQL."""

    def __init__(self, tables: InboxTables, lock_timeout: dt.timedelta | None) -> None:
        super().__init__(tables, lock_timeout)
        # Written as text on purpose: SQLAlchemy 2.0 does not cache the compiled
        # form of postgresql.insert() (sqlalchemy/sqlalchemy#10445), and
        # recompiling this statement for every message tripled the guard's cost.
        self._claim_stmt = claim_text(_claim_sql(lock_timeout), tables)
        self._quarantine_stmt = on_conflict_quarantine(insert, tables.quarantine)
        self.store_result_stmt = _store_text(tables)

    def attempt(self, params: Mapping[str, Any]) -> Steps[Claim | None]:
        """Claim in one round trip; read again only after a lost race."""
        row = (yield self._claim_stmt, params).first()
        if row is not None and row[3] is not None:
            if row[3]:
                return Claim(True, row[0])
            return Claim(False, row[0], row[1], row[2])
        row = (yield self.lookup_stmt, params).first()
        return None if row is None else self.existing(row)

    def upsert_quarantine(self) -> Executable:
        """``INSERT ... ON CONFLICT DO UPDATE`` counting occurrences."""
        return self._quarantine_stmt


def _claim_sql(lock_timeout: dt.timedelta | None) -> str:
    """The claim: insert the row, or return the stored one, in one statement.

    Rows: ``(digest, NULL, NULL, true)`` for a fresh claim, the stored
    ``(digest, result, result_expires_at, false)`` for a duplicate, and, with
    a lock timeout, ``(NULL, NULL, NULL, NULL)`` after a lost race (nothing
    else to return). With a lock timeout, the caller's own setting is read
    first (``prev``, materialized before the insert sets the bound) and put
    back on whichever row comes out, after the insert has finished waiting.
    """
    insert = (
        "INSERT INTO {inbox}"
        " (consumer, command_id, digest, processed_at, expires_at, result_expires_at)"
        " SELECT :consumer, :command_id, :digest, :processed_at, :expires_at,"
        " :result_expires_at"
    )
    conflict = " ON CONFLICT (consumer, command_id) DO NOTHING RETURNING digest"
    # The stored row is read by the same two binds the insert uses (a text
    # statement may repeat a bind), so the driver sends six parameters, not eight.
    stored = " FROM {inbox} WHERE consumer = :consumer AND command_id = :command_id"
    if lock_timeout is None:
        return (
            f"WITH claimed AS ({insert}{conflict})"
            " SELECT digest, NULL AS result, NULL AS result_expires_at, true AS fresh"
            " FROM claimed"
            " UNION ALL"
            f" SELECT digest, result, result_expires_at, false{stored}"
            " AND NOT EXISTS (SELECT 1 FROM claimed)"
        )
    millis = max(1, int(lock_timeout.total_seconds() * 1000))
    restore = "set_config('lock_timeout', (SELECT v FROM prev), true)"
    return (
        "WITH prev AS MATERIALIZED (SELECT current_setting('lock_timeout') AS v),"
        f" claimed AS ({insert}"
        f" FROM prev WHERE set_config('lock_timeout', '{millis}', true) IS NOT NULL{conflict})"
        " SELECT digest, NULL AS result, NULL AS result_expires_at, true AS fresh,"
        f" {restore} AS restored FROM claimed"
        " UNION ALL"
        f" SELECT digest, result, result_expires_at, false, {restore}{stored}"
        " AND NOT EXISTS (SELECT 1 FROM claimed)"
        " UNION ALL"
        f" SELECT NULL, NULL, NULL, NULL, {restore}"
        " WHERE NOT EXISTS (SELECT 1 FROM claimed)"
        f" AND NOT EXISTS (SELECT 1{stored})"
    )


def _store_text(tables: InboxTables) -> DirectSelect:
    """The result store as text, so it may take the direct path too; ``RETURNING``
    makes it a statement with rows, and its row count is the rows it updated."""
    return direct(
        table_text(
            "UPDATE {inbox} SET result = :new_result"
            " WHERE consumer = :key_consumer AND command_id = :key_command_id RETURNING 1",
            inbox=tables.inbox,
        )
        .bindparams(
            bindparam("new_result", type_=long_text()),
            bindparam("key_consumer", type_=id_type()),
            bindparam("key_command_id", type_=id_type()),
        )
        .columns(column("stored", Integer()))
    )


def claim_text(sql: str, tables: InboxTables, *extra: BindParameter[Any]) -> DirectSelect:
    """A claim statement's text with the claim's bind types and result columns
    (``extra``: further bind parameters the statement names), run on the
    caller's DBAPI cursor where :mod:`inboxguard.sql.direct` allows."""
    return direct(
        table_text(sql, inbox=tables.inbox)
        .bindparams(
            bindparam("consumer", type_=id_type()),
            bindparam("command_id", type_=id_type()),
            bindparam("digest", type_=digest_type()),
            bindparam("processed_at", type_=UtcDateTime()),
            bindparam("expires_at", type_=UtcDateTime()),
            bindparam("result_expires_at", type_=UtcDateTime()),
            *extra,
        )
        .columns(
            column("digest", digest_type()),
            column("result", long_text()),
            column("result_expires_at", UtcDateTime()),
            column("fresh", Boolean()),
        )
    )
