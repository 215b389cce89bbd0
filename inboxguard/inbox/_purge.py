"""Safe purge: expired evidence goes, in short batches that never wait on a
worker's claim.

A purge runs three steps, each in batches of at most ``batch_size`` rows, each
batch its own short transaction on the purge's own connection:

1. delete evidence rows whose ``expires_at`` has passed;
2. compact: null the stored ``result`` of rows past their ``result_expires_at``
   (the evidence row itself stays until ``expires_at``);
3. delete *resolved* quarantine records last seen longer ago than the
   horizon. Open quarantine records are never touched.

Where the database allows it (its purge statements' ``single_purger`` flag:
PostgreSQL, MariaDB/MySQL) only one purger runs at a time; another returns at
once with ``PurgeReport.acquired`` false. The purge has sync callers only (the
inbox's ``purge()`` and the CLI), so it drives its statements directly.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from sqlalchemy import Connection
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from inboxguard.errors import ConfigurationError
from inboxguard.sql.dialects import PurgeStatements, database_for
from inboxguard.sql.dialects.postgresql.partitions import DropOutcome
from inboxguard.sql.errors import INBOX_SCHEMA, is_busy, schema_required
from inboxguard.sql.tables import InboxTables

__all__ = ["PurgePlan", "PurgeReport"]

#: How often one batch is retried after a lock timeout or deadlock before giving up.
BUSY_RETRIES = 5


@dataclass(frozen=True, slots=True)
class PurgeReport:
    """What one :meth:`inboxguard.Inbox.purge` did.

    ``acquired`` is false when another purger held the lock (nothing was
    done); ``complete`` is false when ``max_batches`` stopped the purge before
    every expired row was gone. ``oldest_remaining_expiry`` is the earliest
    ``expires_at`` left in the inbox (None when it is empty). ``retries``
    counts batches retried after a lock timeout or deadlock; ``now`` is the
    instant the purge measured expiry against. On a partitioned inbox,
    ``partitions_dropped`` names the partitions dropped whole (their rows are
    not counted in ``deleted``, which counts the DEFAULT partition's rows),
    ``partitions_kept`` the fully expired ones kept because an open
    quarantine record names a row in them, and ``partitions_created`` those
    created ahead.
    """

    deleted: int = 0
    results_dropped: int = 0
    quarantine_deleted: int = 0
    batches: int = 0
    seconds: float = 0.0
    oldest_remaining_expiry: dt.datetime | None = None
    acquired: bool = True
    complete: bool = True
    retries: int = 0
    now: dt.datetime | None = field(default=None, repr=False)
    partitions_created: tuple[str, ...] = ()
    partitions_dropped: tuple[str, ...] = ()
    partitions_kept: tuple[str, ...] = ()

    def summary(self) -> str:
        """One line a person can read."""
        if not self.acquired:
            return "another purger holds the lock; nothing done"
        oldest = (
            self.oldest_remaining_expiry.isoformat() if self.oldest_remaining_expiry else "none"
        )
        state = "complete" if self.complete else "stopped at max_batches"
        rate = self.deleted / self.seconds if self.seconds else 0.0
        parts = (
            f"; partitions: {len(self.partitions_dropped)} dropped,"
            f" {len(self.partitions_kept)} kept for open quarantine,"
            f" {len(self.partitions_created)} created ahead"
            if self.partitions_dropped or self.partitions_kept or self.partitions_created
            else ""
        )
        return (
            f"deleted {self.deleted} expired rows, dropped {self.results_dropped} results,"
            f" deleted {self.quarantine_deleted} resolved quarantine records in"
            f" {self.batches} batches, {self.seconds:.2f}s ({rate:,.0f} rows/s); {state};"
            f" oldest remaining expiry: {oldest}{parts}"
        )


@dataclass(frozen=True, slots=True)
class PurgePlan:
    """What a purge at ``now`` would do (``--dry-run``)."""

    expired: int
    results_due: int
    quarantine_due: int
    oldest_expiry: dt.datetime | None


Progress = Callable[[PurgeReport], None]


class PartitionStep(Protocol):
    """The purge's partition step on a partitioned inbox (see
    :class:`inboxguard.inbox._partitioning.Partitions`)."""

    #: The tables whose expired rows go one by one (the DEFAULT partition).
    row_tables: InboxTables

    def purge_step(self, conn: Connection, now: dt.datetime) -> tuple[list[str], DropOutcome]:
        """Create the partitions ahead, drop the expired ones."""
        ...

    def droppable_rows(self, conn: Connection, now: dt.datetime) -> int:
        """Rows the partitions to drop hold."""
        ...


def plan_purge(
    engine: Engine,
    tables: InboxTables,
    now: dt.datetime,
    quarantine_before: dt.datetime | None,
    partitions: PartitionStep | None = None,
) -> PurgePlan:
    """Count what a purge would delete or compact, changing nothing.

    Raises:
        UnsupportedDialectError: the engine's database is not supported.
    """
    sql = database_for(engine.dialect).purge(tables)
    with schema_required(INBOX_SCHEMA), engine.connect() as conn:
        expired, due, quarantine = sql.count(conn, now, quarantine_before)
        oldest = sql.oldest_expiry(conn)
        if partitions is not None:
            rows = database_for(engine.dialect).purge(partitions.row_tables)
            expired = rows.count(conn, now, None)[0] + partitions.droppable_rows(conn, now)
    return PurgePlan(expired, due, quarantine, oldest)


def run_purge(
    engine: Engine,
    tables: InboxTables,
    *,
    now: dt.datetime,
    quarantine_before: dt.datetime | None,
    batch_size: int = 1000,
    max_batches: int | None = None,
    progress: Progress | None = None,
    partitions: PartitionStep | None = None,
) -> PurgeReport:
    """Purge ``tables`` as of ``now``; see the module docstring. On a
    partitioned inbox (``partitions``), the expired partitions are dropped
    whole first, under the same single-purger lock, and only the DEFAULT
    partition's expired rows are deleted one by one.

    Raises:
        ConfigurationError: ``batch_size`` or ``max_batches`` is not a
            positive int, or ``now`` is not timezone-aware.
        UnsupportedDialectError: the engine's database is not supported.
    """
    _validate(now, batch_size, max_batches)
    sql = database_for(engine.dialect).purge(tables)
    started = time.perf_counter()
    with schema_required(INBOX_SCHEMA), engine.connect() as conn:
        if sql.isolation_level is not None:
            conn.execution_options(isolation_level=sql.isolation_level)
        if not _lock(conn, sql):
            return PurgeReport(acquired=False, complete=False, now=now)
        try:
            run = _Run(conn, sql, now, batch_size, max_batches, progress)
            if partitions is not None:
                created, outcome = partitions.purge_step(conn, now)
                run.expiring = database_for(engine.dialect).purge(partitions.row_tables)
                run.report = replace(
                    run.report,
                    partitions_created=tuple(created),
                    partitions_dropped=outcome.dropped,
                    partitions_kept=outcome.kept,
                )
            report = run.all_steps(quarantine_before)
        finally:
            if sql.single_purger:
                sql.unlock(conn)
                conn.commit()
    return replace(report, seconds=time.perf_counter() - started)


def _lock(conn: Connection, sql: PurgeStatements) -> bool:
    """Take the single-purger lock where the database has one; True when this
    purge may run."""
    if not sql.single_purger:
        return True
    acquired = sql.try_lock(conn)
    conn.commit()
    return acquired


class _Run:
    """One purge's state: its connection, counters and batch budget."""

    def __init__(
        self,
        conn: Connection,
        sql: PurgeStatements,
        now: dt.datetime,
        batch_size: int,
        max_batches: int | None,
        progress: Progress | None,
    ) -> None:
        self.conn, self.sql, self.now, self.n = conn, sql, now, batch_size
        self.max_batches, self.progress = max_batches, progress
        self.report = PurgeReport(now=now)
        self.started = time.perf_counter()
        #: Whose expired rows go one by one (on a partitioned inbox: the DEFAULT partition's).
        self.expiring = sql

    def all_steps(self, quarantine_before: dt.datetime | None) -> PurgeReport:
        while self._room() and self._batch("deleted", self.expiring.delete_expired, self.now):
            pass
        after: list[dt.datetime | None] = [None]

        def drop(conn: Connection, now: dt.datetime, n: int) -> int:
            count, after[0] = self.sql.drop_results(conn, now, n, after[0])
            return count

        while self._room() and self._batch("results_dropped", drop, self.now):
            pass
        if quarantine_before is not None:
            step = self.sql.delete_resolved_quarantine
            while self._room() and self._batch("quarantine_deleted", step, quarantine_before):
                pass
        oldest = self.sql.oldest_expiry(self.conn)
        self.conn.commit()
        return replace(self.report, oldest_remaining_expiry=oldest)

    def _room(self) -> bool:
        if self.max_batches is not None and self.report.batches >= self.max_batches:
            self.report = replace(self.report, complete=False)
            return False
        return True

    def _batch(
        self, counter: str, step: Callable[[Connection, dt.datetime, int], int], at: dt.datetime
    ) -> bool:
        """Run one batch in its own transaction; True when it was full (more may remain)."""
        for attempt in range(BUSY_RETRIES + 1):
            try:
                with self.conn.begin():
                    count = step(self.conn, at, self.n)
                break
            except DBAPIError as error:
                if not is_busy(error) or attempt == BUSY_RETRIES:
                    raise
                self.report = replace(self.report, retries=self.report.retries + 1)
                time.sleep(0.05 * (attempt + 1))
        done = getattr(self.report, counter) + count
        self.report = replace(
            self.report,
            batches=self.report.batches + 1,
            seconds=time.perf_counter() - self.started,
            **{counter: done},
        )
        if self.progress is not None:
            self.progress(self.report)
        return count >= self.n


def _validate(now: dt.datetime, batch_size: int, max_batches: int | None) -> None:
    if not isinstance(now, dt.datetime) or now.utcoffset() is None:
        msg = f"purge(now=...) must be a timezone-aware datetime, got {now!r}"
        raise ConfigurationError(msg)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        msg = f"purge(batch_size=...) must be a positive int, got {batch_size!r}; e.g. 1000"
        raise ConfigurationError(msg)
    if max_batches is not None and (
        isinstance(max_batches, bool) or not isinstance(max_batches, int) or max_batches < 1
    ):
        msg = f"purge(max_batches=...) must be a positive int or None, got {max_batches!r}"
        raise ConfigurationError(msg)
