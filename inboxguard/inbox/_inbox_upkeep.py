"""The schema and upkeep half of :class:`inboxguard.Inbox`: its tables and
partitions, the retention check, the evidence lookup, purge and watermarks.

:class:`UpkeepMethods` holds these methods; :class:`~inboxguard.Inbox`
inherits them, so its guard entry points stay in a module of their own.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Connection, Table
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard._core.retention import RetentionPolicy
from inboxguard.errors import ConfigurationError
from inboxguard.inbox._flow import GuardFlows
from inboxguard.inbox._inspection import lookup_evidence
from inboxguard.inbox._maintenance import Maintenance, ResolvedCutoff
from inboxguard.inbox._partitioning import DEFAULT_AHEAD, Partitions, check_layout
from inboxguard.inbox._purge import Progress, PurgePlan, PurgeReport
from inboxguard.inbox._records import InboxRecord
from inboxguard.sql.errors import INBOX_SCHEMA
from inboxguard.sql.schema import check_tables
from inboxguard.sql.tables import InboxTables

__all__ = ["UpkeepMethods"]


class UpkeepMethods:
    """The schema and upkeep methods of :class:`inboxguard.Inbox` (see there)."""

    engine: Engine
    retention: RetentionPolicy
    tables: InboxTables
    _flows: GuardFlows
    _partitions: Partitions | None
    _upkeep: Maintenance

    # -- schema -------------------------------------------------------------------------

    @property
    def watermarks(self) -> Table:
        """The ``<prefix>watermark`` table (created by ``create_schema()``)."""
        return self._upkeep.watermarks

    def create_schema(self) -> None:
        """Create the inbox, quarantine and watermark tables (and the audit
        trails of operator replays and actions) if they do not exist
        (idempotent). With ``partitioning``, the inbox table is partitioned
        and its DEFAULT partition and the partitions ahead are created too.

        Raises:
            ConfigurationError: with ``partitioning``, an unpartitioned inbox
                table already exists.
        """
        if self._partitions is None:
            self.tables.metadata.create_all(self.engine, tables=self._every_table())
            return
        others = [t for t in self._every_table() if t is not self.tables.inbox]
        self.tables.metadata.create_all(self.engine, tables=others)
        self._partitions.create_schema()

    def create_partitions(
        self, *, ahead: int = DEFAULT_AHEAD, now: dt.datetime | None = None
    ) -> list[str]:
        """Create the missing partitions of a partitioned inbox, from the
        period of ``now`` (default: the inbox clock) to ``ahead`` periods past
        the expiry of a claim made then; return the names created. Every
        :meth:`purge` does this too; run either at least once per period. A
        claim whose expiry no partition covers lands in the DEFAULT
        partition, and the partition created later takes its rows over. Any
        partition lacking its unique (consumer, command_id) index gets it.

        Raises:
            ConfigurationError: the inbox has no ``partitioning``, a bad
                ``ahead``, or a partition holding a command twice (its
                unique index cannot be created).
        """
        if self._partitions is None:
            msg = "create_partitions() needs Inbox(..., partitioning='daily'|'weekly'|'monthly')"
            raise ConfigurationError(msg)
        return self._partitions.create_ahead(now=now, ahead=ahead)

    def check_schema(self) -> None:
        """Refuse a database without the inbox, quarantine or watermark table
        (adapters call it at worker start-up).

        With ``partitioning``, also refuse an inbox table that is not
        partitioned, has not its DEFAULT partition, or has a partition without
        its unique (consumer, command_id) index.

        Raises:
            ConfigurationError: a table is missing; the message names
                ``create_schema()`` and the Alembic branch that create it.
                Or the partitions are not as the claim needs them; the
                message names each partition and the fix.
        """
        check_tables(self.engine, self._own_tables(), INBOX_SCHEMA)
        check_layout(self.engine, self.tables, self._partitions)

    def drop_schema(self) -> None:
        """Drop the inbox, quarantine and watermark tables and the audit trails,
        with every record in them (and every partition of a partitioned inbox)."""
        self.tables.metadata.drop_all(self.engine, tables=self._every_table())

    def _own_tables(self) -> list[Table]:
        return [self.tables.inbox, self.tables.quarantine, self.watermarks]

    def _every_table(self) -> list[Table]:
        audit = [self.tables.quarantine_replays, self.tables.quarantine_actions]
        return [*self._own_tables(), *audit]

    # -- retention ----------------------------------------------------------------------

    def require_alignment(self, source: str = "declared", **windows: dt.timedelta) -> None:
        """Fail unless every replay window fits inside the evidence horizon.

        Adapters call this at worker start with the windows they discover,
        naming where they found them in ``source``.

        Raises:
            RetentionMisalignedError: a window is longer than the horizon.
        """
        self.retention.check(source, **windows)

    # -- evidence and upkeep --------------------------------------------------------------

    def lookup(self, consumer: str, command_id: str) -> InboxRecord | None:
        """Return the committed evidence of a command, or None."""
        return lookup_evidence(self.engine, self.tables, consumer, command_id)

    def purge(
        self,
        *,
        now: dt.datetime | None = None,
        batch_size: int = 1000,
        max_batches: int | None = None,
        progress: Progress | None = None,
        resolved_before: ResolvedCutoff = "horizon",
    ) -> PurgeReport:
        """Delete expired evidence in short batches.

        On a partitioned inbox the partitions ahead are created first, then
        every partition whose whole range has expired is detached and dropped
        (never one holding a row an open quarantine record names), and only
        the DEFAULT partition's expired rows are deleted in batches.

        Guarantees: a row whose ``expires_at`` is after ``now`` (default: the
        inbox clock) is never deleted; an open quarantine record is never
        touched; each batch is its own transaction on the purge's own
        connection; on PostgreSQL and MariaDB/MySQL rows a worker holds are
        skipped (``SKIP LOCKED``), never waited for, and only one purger runs
        at a time (another returns at once, ``acquired=False``). Stored
        results past ``result_ttl`` are nulled while their evidence stays.
        Resolved quarantine records go once last seen before
        ``resolved_before``: by default ``now`` minus the horizon; ``None``
        keeps them all. ``progress`` is called with the running report after
        each batch.

        Raises:
            ConfigurationError: a bad ``now``, ``batch_size`` or ``max_batches``.
        """
        report = self._upkeep.purge(
            now=now,
            batch_size=batch_size,
            max_batches=max_batches,
            progress=progress,
            resolved_before=resolved_before,
        )
        if report.acquired:
            tel = self._flows.telemetry
            tel.add("purge_rows", report.deleted, {"inboxguard.table": "inbox"})
            tel.add("purge_rows", report.quarantine_deleted, {"inboxguard.table": "quarantine"})
            tel.record("purge_duration", report.seconds, {})
        return report

    def purge_plan(
        self, *, now: dt.datetime | None = None, resolved_before: ResolvedCutoff = "horizon"
    ) -> PurgePlan:
        """Count what :meth:`purge` with the same arguments would delete or
        compact, changing nothing (a dry run)."""
        return self._upkeep.plan(now=now, resolved_before=resolved_before)

    def advance_watermark(
        self, session: Session | Connection, *, consumer: str, key: str, position: int
    ) -> bool:
        """Advance the watermark of (``consumer``, ``key``) in the caller's transaction.

        Returns True when ``position`` is higher than the stored one (it is
        stored, or the key is new), False when it is at or below it: a
        duplicate to skip. The write commits or rolls back with the caller's
        transaction; concurrent advances serialize on the row, so the stored
        position never goes backwards. A race on a key's very first advance
        can end in a deadlock on MariaDB/MySQL or a serialization failure on
        PostgreSQL under REPEATABLE READ; both are retryable
        (:func:`inboxguard.is_retryable`).

        Raises:
            InvalidCommandError: ``consumer`` or ``key`` is unusable.
            ConfigurationError: ``position`` is not a 64-bit int, or the
                session is in AUTOCOMMIT mode.
        """
        return self._upkeep.advance_watermark(
            session, consumer=consumer, key=key, position=position
        )
