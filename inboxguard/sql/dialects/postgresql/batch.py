"""PostgreSQL batch claim: a whole batch in one statement.

Features:

- claim: one statement whatever the batch size. The keys and digests travel
  as two arrays (``unnest``), so the statement text never changes and its
  compiled form stays cached. A data-modifying CTE inserts the absent rows in
  key order (``ON CONFLICT DO NOTHING RETURNING``) and the same statement
  reads the stored rows of the others, one primary-key lookup per key: the
  plan is linear in the batch size (no anti-join against the inserted rows).
  Only keys whose conflicting row was committed after the statement's
  snapshot need a second read.
- lock wait: bounded by ``lock_timeout`` inside the statement, as the single
  claim does, and put back to the caller's value by the statement's last row.
  A timeout fails the statement (SQLSTATE 55P03), which aborts the
  transaction: the whole batch is refused as in progress.
- results: one ``UPDATE ... FROM unnest(...)`` for every fresh entry's result.
- a batch of one command, and a single result, take the single claim's
  statements (:class:`~.inbox.PostgresqlInbox`): the same row, lock bound
  and restore of the caller's ``lock_timeout``, without the arrays and the
  ``LATERAL`` lookups (``python -m benchmarks batch``, batch size 1).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Boolean, bindparam, column

from inboxguard.sql.dialects.base.batch import BatchStatements
from inboxguard.sql.dialects.base.inbox import Claim, Step, Steps
from inboxguard.sql.dialects.postgresql.inbox import PostgresqlInbox
from inboxguard.sql.table_text import table_text
from inboxguard.sql.tables import InboxTables
from inboxguard.sql.types import UtcDateTime, digest_type, id_type, long_text

__all__ = ["PostgresqlBatch"]

_KEYS = "unnest(CAST(:ids AS VARCHAR[]), CAST(:digests AS VARCHAR[])) AS k(command_id, digest)"
#: One primary-key lookup per key ``k.command_id``, as a LATERAL subquery the
#: planner cannot flatten (``OFFSET 0``): a join it could plan would scan every
#: row of the consumer when the table's statistics lag behind its growth (a
#: hash join measured 6 ms a batch on 10,000 rows).
_LOOKUP = (
    "LATERAL (SELECT {cols} FROM {{inbox}}"
    " WHERE consumer = :consumer AND command_id = k.command_id OFFSET 0) AS f"
)
_BY_KEY = "unnest(CAST(:ids AS VARCHAR[])) AS k(command_id), " + _LOOKUP


class PostgresqlBatch(BatchStatements):
    """Batch statements for PostgreSQL."""

    def __init__(self, tables: InboxTables, lock_timeout: dt.timedelta | None) -> None:
        super().__init__(tables, lock_timeout)
        self._one = PostgresqlInbox(tables, lock_timeout)
        self._claim = (
            table_text(_claim_sql(lock_timeout), inbox=tables.inbox)
            .bindparams(
                bindparam("consumer", type_=id_type()),
                bindparam("processed_at", type_=UtcDateTime()),
                bindparam("expires_at", type_=UtcDateTime()),
                bindparam("result_expires_at", type_=UtcDateTime()),
            )
            .columns(
                column("command_id", id_type()),
                column("digest", digest_type()),
                column("result", long_text()),
                column("result_expires_at", UtcDateTime()),
                column("fresh", Boolean()),
            )
        )
        # The rows are found key by key (primary key) and updated by their
        # physical address (a TID scan): no plan can scan the consumer's rows.
        self._store = table_text(
            "UPDATE {inbox} AS s SET result = v.result"
            " FROM unnest(CAST(:ids AS VARCHAR[]), CAST(:results AS TEXT[]))"
            " AS v(command_id, result)"
            f" WHERE s.ctid = ANY(ARRAY(SELECT f.ctid FROM {_BY_KEY.format(cols='ctid')}))"
            " AND s.command_id = v.command_id",
            inbox=tables.inbox,
        )
        self._read_any = table_text(
            "SELECT k.command_id, f.digest, f.result, f.result_expires_at"
            f" FROM {_BY_KEY.format(cols='digest, result, result_expires_at')}",
            inbox=tables.inbox,
        ).columns(
            column("command_id", id_type()),
            column("digest", digest_type()),
            column("result", long_text()),
            column("result_expires_at", UtcDateTime()),
        )

    def claim(
        self, shared: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
    ) -> Steps[dict[str, Claim]]:
        """One statement: fresh rows, stored rows, and (with a lock timeout)
        one last row that puts the caller's setting back. A batch of one takes
        the single claim (a second read only after a lost race)."""
        if len(rows) == 1:
            key = rows[0]["command_id"]
            one = yield from self._one.attempt({**shared, **rows[0]})
            return {} if one is None else {key: one}
        params = {
            **shared,
            "ids": [r["command_id"] for r in rows],
            "digests": [r["digest"] for r in rows],
        }
        found: dict[str, Claim] = {}
        for row in (yield self._claim, params):
            if row.command_id is None:  # the restoring row
                continue
            if row.fresh:
                found[row.command_id] = Claim(True, row.digest)
            elif row.command_id not in found:
                # A key can come back both inserted and stored when its old
                # row was deleted (a purge) after the snapshot and before the
                # insert: the inserted row is the claim.
                found[row.command_id] = Claim(False, row.digest, row.result, row.result_expires_at)
        return found

    def read_step(self, consumer: str, keys: Sequence[str]) -> Step:
        """One array-bound read, whatever the number of keys."""
        return self._read_any, {"consumer": consumer, "ids": list(keys)}

    def store_results(self, consumer: str, results: Sequence[tuple[str, str]]) -> list[Step]:
        """One ``UPDATE ... FROM unnest``; one result, the single guard's ``UPDATE``."""
        if len(results) == 1:
            [(command_id, result)] = results
            one = self._one.store_result_params(consumer, command_id, result)
            return [(self._one.store_result_stmt, one)]
        params = {
            "consumer": consumer,
            "ids": [k for k, _ in results],
            "results": [r for _, r in results],
        }
        return [(self._store, params)]


def _claim_sql(lock_timeout: dt.timedelta | None) -> str:
    """Insert the absent rows in key order, return fresh and stored rows.

    Rows: ``(command_id, digest, NULL, NULL, true)`` per inserted key, the
    stored ``(command_id, digest, result, result_expires_at, false)`` per key
    visible to the statement's snapshot, and, with a lock timeout, one row of
    NULLs whose last column puts the caller's ``lock_timeout`` back. That row
    aggregates over every inserted row, so it is produced only once the
    insert has finished waiting.
    """
    insert = (
        "INSERT INTO {inbox}"
        " (consumer, command_id, digest, processed_at, expires_at, result_expires_at)"
        " SELECT :consumer, k.command_id, k.digest, :processed_at, :expires_at,"
        f" :result_expires_at FROM {_KEYS}"
    )
    conflict = (
        " ORDER BY k.command_id"
        " ON CONFLICT (consumer, command_id) DO NOTHING RETURNING command_id, digest"
    )
    # Driven by the keys: one primary-key lookup per key (_LOOKUP). The
    # lookup reads the statement's snapshot, which never holds the rows the
    # insert adds, so the keys need no comparison with the inserted ones (a
    # "NOT IN (SELECT ... FROM claimed)" was a per-row scan of the inserted
    # rows once the batch outgrew work_mem: quadratic in the batch size).
    stored = f" FROM {_KEYS}, {_LOOKUP.format(cols='digest, result, result_expires_at')}"
    if lock_timeout is None:
        return (
            f"WITH claimed AS ({insert}{conflict})"
            " SELECT command_id, digest, NULL AS result, NULL AS result_expires_at,"
            " true AS fresh FROM claimed"
            " UNION ALL"
            f" SELECT k.command_id, f.digest, f.result, f.result_expires_at, false{stored}"
        )
    millis = max(1, int(lock_timeout.total_seconds() * 1000))
    return (
        "WITH prev AS MATERIALIZED (SELECT current_setting('lock_timeout') AS v),"
        f" claimed AS ({insert}, prev"
        f" WHERE set_config('lock_timeout', '{millis}', true) IS NOT NULL{conflict})"
        " SELECT command_id, digest, NULL AS result, NULL AS result_expires_at,"
        " true AS fresh, NULL AS restored FROM claimed"
        " UNION ALL"
        f" SELECT k.command_id, f.digest, f.result, f.result_expires_at, false, NULL{stored}"
        " UNION ALL"
        " SELECT NULL, NULL, NULL, NULL, NULL,"
        " set_config('lock_timeout', (SELECT v FROM prev), true)"
        " FROM (SELECT count(*) FROM claimed) AS done"
    )
