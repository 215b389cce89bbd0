"""The inbox's upkeep: purge (and its plan, and on a partitioned inbox its
partition step) and domain watermarks.

:class:`Maintenance` is a collaborator of :class:`inboxguard.Inbox`, kept
apart so the guard's path stays small.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from sqlalchemy import Connection
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard._core.clock import Clock, as_utc, checked_now
from inboxguard._core.retention import RetentionPolicy
from inboxguard.inbox._purge import (
    PartitionStep,
    Progress,
    PurgePlan,
    PurgeReport,
    plan_purge,
    run_purge,
)
from inboxguard.inbox._watermark import advance
from inboxguard.sql.connection import connection_of
from inboxguard.sql.tables import InboxTables

__all__ = ["Maintenance", "ResolvedCutoff"]

#: Which resolved quarantine records a purge deletes: those last seen before a
#: datetime, none (``None``), or those older than the horizon (``"horizon"``).
ResolvedCutoff = dt.datetime | Literal["horizon"] | None

_WRONG_TYPE = "advance_watermark() needs a sqlalchemy Session or Connection, got {type}"
_ROW = "the watermark could commit without the handler's changes"


class Maintenance:
    """Purge and watermarks of one inbox's tables."""

    def __init__(
        self,
        engine: Engine,
        tables: InboxTables,
        retention: RetentionPolicy,
        clock: Clock,
        partitions: PartitionStep | None = None,
    ) -> None:
        self._engine = engine
        self._partitions = partitions
        self._tables = tables
        self._retention = retention
        self._clock = clock
        self.watermarks = tables.watermark

    def plan(self, *, now: dt.datetime | None, resolved_before: ResolvedCutoff) -> PurgePlan:
        """Count what :meth:`purge` would do, changing nothing."""
        at = self._now(now)
        cutoff = self._cutoff(at, resolved_before)
        return plan_purge(self._engine, self._tables, at, cutoff, self._partitions)

    def purge(
        self,
        *,
        now: dt.datetime | None,
        batch_size: int,
        max_batches: int | None,
        progress: Progress | None,
        resolved_before: ResolvedCutoff,
    ) -> PurgeReport:
        """Run the purge; see :meth:`inboxguard.Inbox.purge`."""
        at = self._now(now)
        return run_purge(
            self._engine,
            self._tables,
            now=at,
            quarantine_before=self._cutoff(at, resolved_before),
            batch_size=batch_size,
            max_batches=max_batches,
            progress=progress,
            partitions=self._partitions,
        )

    def advance_watermark(
        self, session: Session | Connection, *, consumer: str, key: str, position: int
    ) -> bool:
        """Advance a watermark in the caller's transaction; see
        :meth:`inboxguard.Inbox.advance_watermark`."""
        conn = connection_of(session, wrong_type=_WRONG_TYPE, row=_ROW)
        return advance(
            conn,
            self.watermarks,
            consumer=consumer,
            key=key,
            position=position,
            now=checked_now(self._clock),
        )

    def _now(self, now: dt.datetime | None) -> dt.datetime:
        return checked_now(self._clock) if now is None else as_utc(now, "purge(now=...)")

    def _cutoff(self, at: dt.datetime, resolved_before: ResolvedCutoff) -> dt.datetime | None:
        if resolved_before != "horizon":
            return resolved_before
        return at - self._retention.horizon if isinstance(at, dt.datetime) else None
