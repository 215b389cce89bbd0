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
  inside the insert, which first keeps the caller's value in the
  transaction-local setting ``inboxguard.lock_timeout``; the row the claim
  returns puts it back once the insert has finished waiting, and after a lost
  race the second ``SELECT`` does (SQLSTATE 55P03 on expiry, which aborts the
  transaction anyway). ``python -m benchmarks candidates`` measures this
  against the alternative of reading the caller's value in a
  ``MATERIALIZED`` CTE, which needs a third branch to put it back after a
  lost race.
- isolation: READ COMMITTED, REPEATABLE READ and SERIALIZABLE. Under the last
  two, a race lost to a concurrent commit is a serialization failure (40001),
  reported as retryable, never a silent skip.
- ``FOR UPDATE SKIP LOCKED``: yes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from sqlalchemy import (
    BindParameter,
    Boolean,
    ColumnClause,
    Executable,
    Integer,
    bindparam,
    column,
)
from sqlalchemy.dialects.postgresql import insert

from inboxguard.sql.dialects.base.inbox import Claim, InboxStatements, Steps, on_conflict_quarantine
from inboxguard.sql.direct import DirectSelect, direct
from inboxguard.sql.table_text import table_text
from inboxguard.sql.tables import InboxTables
from inboxguard.sql.types import UtcDateTime, digest_type, id_type, long_text

__all__ = ["PostgresqlInbox", "claim_text"]


class PostgresqlInbox(InboxStatements):
    """Inbox statements for PostgreSQL."""

    def __init__(self, tables: InboxTables, lock_timeout: dt.timedelta | None) -> None:
        super().__init__(tables, lock_timeout)
        # Written as text on purpose: SQLAlchemy 2.0 does not cache the compiled
        # form of postgresql.insert() (sqlalchemy/sqlalchemy#10445), and
        # recompiling this statement for every message tripled the guard's cost.
        self._claim_stmt = claim_text(_claim_sql(lock_timeout), tables)
        self._stored_stmt = _stored_text(lock_timeout, tables)
        self._quarantine_stmt = on_conflict_quarantine(insert, tables.quarantine)
        self.store_result_stmt = _store_text(tables)

    def attempt(self, params: Mapping[str, Any]) -> Steps[Claim | None]:
        """Claim in one round trip; read again only after a lost race."""
        row = (yield self._claim_stmt, params).first()
        if row is None:  # committed after the claim's snapshot: read it now
            row = (yield self._stored_stmt, params).first()
            if row is None or row[0] is None:  # deleted since the insert saw it
                return None
        if row[3]:
            return Claim(True, row[0])
        return Claim(False, row[0], row[1], row[2])

    def upsert_quarantine(self) -> Executable:
        """``INSERT ... ON CONFLICT DO UPDATE`` counting occurrences."""
        return self._quarantine_stmt


#: Where the claim keeps the caller's ``lock_timeout`` until it is put back (a
#: transaction-local custom setting, gone when the transaction ends).
_KEPT = "inboxguard.lock_timeout"
_RESTORE = f"set_config('lock_timeout', current_setting('{_KEPT}'), true)"


def _claim_sql(lock_timeout: dt.timedelta | None) -> str:
    """The claim: insert the row, or return the stored one, in one statement.

    Rows: ``(digest, NULL, NULL, true)`` for a fresh claim, the stored
    ``(digest, result, result_expires_at, false)`` for a duplicate, and none
    after a lost race (the row committed after the statement's snapshot).

    With a lock timeout, the insert's ``WHERE`` keeps the caller's setting
    in ``inboxguard.lock_timeout`` and sets the bound (the inner
    ``set_config`` runs first: it is an argument of the outer); whichever
    row comes out puts the caller's setting back, after the insert has
    finished waiting. After a lost race, :func:`_stored_sql` puts it back.
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
    stored = (
        " FROM {inbox} WHERE consumer = :consumer AND command_id = :command_id"
        " AND NOT EXISTS (SELECT 1 FROM claimed)"
    )
    bound, restored = "", ""
    if lock_timeout is not None:
        millis = max(1, int(lock_timeout.total_seconds() * 1000))
        keep = f"set_config('{_KEPT}', current_setting('lock_timeout'), true)"
        bound = (
            f" WHERE set_config('lock_timeout', '{millis}' || left({keep}, 0), true) IS NOT NULL"
        )
        restored = f", {_RESTORE} AS restored"
    return (
        f"WITH claimed AS ({insert}{bound}{conflict})"
        " SELECT digest, NULL AS result, NULL AS result_expires_at, true AS fresh"
        f"{restored} FROM claimed"
        " UNION ALL"
        f" SELECT digest, result, result_expires_at, false{restored}{stored}"
    )


def _stored_sql(lock_timeout: dt.timedelta | None) -> str:
    """The stored row after a lost race: always one row, its ``digest`` NULL when
    the row is gone. With a lock timeout, the row is read beside the call that
    puts the caller's setting back, so it is put back whether or not the row
    is still there."""
    source = "(SELECT 1) AS one" if lock_timeout is None else f"(SELECT {_RESTORE}) AS restored"
    return (
        "SELECT i.digest, i.result, i.result_expires_at, false AS fresh"
        f" FROM {source} LEFT JOIN {{inbox}} AS i"
        " ON i.consumer = :consumer AND i.command_id = :command_id"
    )


def _stored_text(lock_timeout: dt.timedelta | None, tables: InboxTables) -> DirectSelect:
    """:func:`_stored_sql` with the key's binds and the claim's result columns."""
    return direct(
        table_text(_stored_sql(lock_timeout), inbox=tables.inbox)
        .bindparams(
            bindparam("consumer", type_=id_type()),
            bindparam("command_id", type_=id_type()),
        )
        .columns(*_claim_columns())
    )


_STORE = (
    "UPDATE {inbox} SET result = :new_result"
    " WHERE consumer = :key_consumer AND command_id = :key_command_id RETURNING 1"
)


def _store_text(tables: InboxTables) -> DirectSelect:
    """The result store as text, so it may take the direct path too; ``RETURNING``
    makes it a statement with rows, and its row count is the rows it updated.

    Its ``at_commit`` variant fails (division by zero) unless it updated
    exactly one row, so it can be sent with the ``COMMIT`` (G36): the
    server then checks what the flow checks of the row count."""
    store = _store_statement(_STORE, tables)
    checked = f"WITH stored AS ({_STORE}) SELECT 1 / (count(*) = 1)::int AS stored FROM stored"
    store.at_commit = _store_statement(checked, tables)
    return store


def _store_statement(sql: str, tables: InboxTables) -> DirectSelect:
    return direct(
        table_text(sql, inbox=tables.inbox)
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
        .columns(*_claim_columns())
    )


def _claim_columns() -> tuple[ColumnClause[Any], ...]:
    """What the claim and the stored row's read return:
    ``(digest, result, result_expires_at, fresh)``."""
    return (
        column("digest", digest_type()),
        column("result", long_text()),
        column("result_expires_at", UtcDateTime()),
        column("fresh", Boolean()),
    )
