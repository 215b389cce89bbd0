"""The inbox's upkeep methods: purge and domain watermarks.

Kept apart from :mod:`inboxguard.inbox` so the claim path stays small;
:class:`inboxguard.Inbox` inherits them.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Connection, Table
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard._core.clock import Clock, checked_now
from inboxguard._core.retention import RetentionPolicy
from inboxguard.inbox._purge import Progress, PurgeReport, run_purge
from inboxguard.inbox._watermark import advance, watermark_table
from inboxguard.sql.schema import InboxTables

__all__ = ["Maintenance"]


class Maintenance:
    """Purge and watermarks, mixed into :class:`inboxguard.Inbox`."""

    engine: Engine
    tables: InboxTables
    retention: RetentionPolicy
    clock: Clock

    @property
    def watermarks(self) -> Table:
        """The ``<prefix>watermark`` table (created by ``create_schema()``)."""
        return watermark_table(self.tables)

    def purge(
        self,
        *,
        now: dt.datetime | None = None,
        batch_size: int = 1000,
        max_batches: int | None = None,
        progress: Progress | None = None,
    ) -> PurgeReport:
        """Delete expired evidence in short batches; see :mod:`inboxguard.inbox._purge`.

        Guarantees: a row whose ``expires_at`` is after ``now`` (default: the
        inbox clock) is never deleted; an open quarantine record is never
        touched; each batch is its own transaction on the purge's own
        connection; on PostgreSQL and MariaDB/MySQL rows a worker holds are
        skipped (``SKIP LOCKED``), never waited for, and only one purger runs
        at a time (another returns at once, ``acquired=False``). Stored
        results past ``result_ttl`` are nulled while their evidence stays.
        Resolved quarantine records go once last seen longer ago than the
        horizon. ``progress`` is called with the running report after each
        batch.

        Raises:
            ConfigurationError: a bad ``now``, ``batch_size`` or ``max_batches``.
        """
        at = checked_now(self.clock) if now is None else now
        before = at - self.retention.horizon if isinstance(at, dt.datetime) else None
        return run_purge(
            self.engine,
            self.tables,
            now=at,
            quarantine_before=before,
            batch_size=batch_size,
            max_batches=max_batches,
            progress=progress,
        )

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
        from inboxguard.inbox._inbox import _connection_of  # noqa: PLC0415 - inbox imports us

        conn = _connection_of(session)
        return advance(
            conn,
            self.watermarks,
            consumer=consumer,
            key=key,
            position=position,
            now=checked_now(self.clock),
        )
