"""The quarantine half of :class:`inboxguard.Inbox`: refusing a delivery
durably, reading the records and their audit trails, and the operator's
resolve, release and replay.

:class:`QuarantineMethods` holds these methods; :class:`~inboxguard.Inbox`
inherits them, so its guard entry points stay in a module of their own.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from inboxguard._core.clock import Clock, checked_now
from inboxguard.inbox._drive import quarantine_async, quarantine_sync
from inboxguard.inbox._flow import GuardFlows
from inboxguard.inbox._quarantine import (
    QuarantineAction,
    QuarantineReplay,
    QuarantineStore,
    audited,
)
from inboxguard.inbox._records import QuarantineReason, QuarantineRecord

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["QuarantineMethods"]


class QuarantineMethods:
    """The quarantine methods of :class:`inboxguard.Inbox` (see there)."""

    engine: Engine
    clock: Clock
    _flows: GuardFlows
    _quarantine: QuarantineStore

    # -- quarantine -----------------------------------------------------------------------

    def quarantine_delivery(
        self,
        *,
        consumer: str,
        command_id: str,
        payload: object,
        reason: QuarantineReason | str,
        exclude: Iterable[str] = (),
        details: Mapping[str, Any] | None = None,
    ) -> bool:
        """Refuse a delivery durably: write (or count again) its quarantine record.

        The record is written in a transaction of its own, so it survives the
        caller's rollback. Adapters call this when a command's retries are
        exhausted, before the broker dead-letters it. Returns False when the
        record could not be written, or the engine's pool had no connection
        of its own to give (it shares the caller's connection, or none is
        free): the whole record is then logged at ERROR, without waiting.

        Raises:
            InvalidCommandError: ``consumer`` or ``command_id`` is unusable.
            PayloadEncodingError: the payload has no canonical encoding.
        """
        request = self._flows.quarantine(consumer, command_id, payload, reason, exclude, details)
        return quarantine_sync(request, self.engine)

    async def quarantine_delivery_async(
        self,
        engine: AsyncEngine,
        *,
        consumer: str,
        command_id: str,
        payload: object,
        reason: QuarantineReason | str,
        exclude: Iterable[str] = (),
        details: Mapping[str, Any] | None = None,
    ) -> bool:
        """:meth:`quarantine_delivery` through an ``AsyncEngine`` on the same database."""
        request = self._flows.quarantine(consumer, command_id, payload, reason, exclude, details)
        return await quarantine_async(request, engine)

    def quarantined(
        self,
        consumer: str | None = None,
        *,
        status: str | None = "open",
        limit: int | None = None,
        after: int | None = None,
    ) -> list[QuarantineRecord]:
        """Return quarantine records (open ones by default; ``None``: every
        status), oldest first, at most ``limit`` of them; ``after`` skips to
        the records whose id is greater (the next page after that id)."""
        return self._quarantine.records(consumer, status, limit=limit, after=after)

    def quarantine_count(self, consumer: str | None = None, *, status: str | None = "open") -> int:
        """How many quarantine records :meth:`quarantined` would list without a limit."""
        return self._quarantine.count(consumer, status)

    def quarantine_record(self, record_id: int) -> QuarantineRecord | None:
        """Return the quarantine record with this id, whatever its status, or None."""
        found = self._quarantine.records(None, None, record_id=record_id)
        return found[0] if found else None

    def quarantine_records_of(
        self, consumer: str, command_id: str, *, limit: int | None = None
    ) -> list[QuarantineRecord]:
        """Every quarantine record (any status) of one command, oldest first;
        with ``limit``, the oldest ``limit`` of them."""
        return self._quarantine.records(consumer, None, command_id=command_id, limit=limit)

    def quarantine_statuses_of(self, consumer: str, command_id: str) -> dict[str, int]:
        """How many quarantine records of one command have each status
        (``{"open": 2, "resolved": 4998}``), in one query."""
        return self._quarantine.statuses(consumer, command_id)

    async def quarantine_records_of_async(
        self, engine: AsyncEngine, consumer: str, command_id: str
    ) -> list[QuarantineRecord]:
        """:meth:`quarantine_records_of` through an ``AsyncEngine`` on the same database."""
        return await self._quarantine.records_of_async(engine, consumer, command_id)

    def resolve_quarantine(
        self, record_id: int, *, actor: str | None = None, reason: str | None = None
    ) -> bool:
        """Mark an open quarantine record resolved; False if none is open with that id.

        With ``actor`` and ``reason`` the resolution is also recorded in the
        audit trail (:meth:`quarantine_actions`), in the same transaction. The
        evidence is untouched: the command is judged as before.

        Raises:
            ConfigurationError: only one of ``actor`` and ``reason`` is given.
        """
        if actor is None and reason is None:
            return self._quarantine.resolve(record_id)
        who, why = audited(actor, reason)
        return self._quarantine.settle(record_id, "resolve", who, why, self._now()) is not None

    def release_quarantine(
        self, record_id: int, *, actor: str, reason: str
    ) -> QuarantineAction | None:
        """Let a quarantined command be processed again: mark the open record
        resolved and, for a payload mismatch, delete the stored evidence of
        the command whose digest differs from the record's incoming one,
        recording who, why and when, in one transaction.

        The next delivery of the command is then processed as fresh, whatever
        its payload, so release only what must run again. A record whose
        refusal came from no stored evidence (beyond retention, retries
        exhausted) is released with nothing to delete; its message still has
        to be published again. None when no open record has that id.

        Raises:
            ConfigurationError: ``actor`` or ``reason`` is empty.
        """
        who, why = audited(actor, reason)
        return self._quarantine.settle(record_id, "release", who, why, self._now())

    def quarantine_actions(self, record_id: int) -> list[QuarantineAction]:
        """The recorded releases and resolutions of a record, oldest first."""
        return self._quarantine.actions(record_id)

    def _now(self) -> dt.datetime:
        return checked_now(self.clock)

    def record_quarantine_replay(
        self,
        record: QuarantineRecord,
        *,
        destination: str,
        replayed_by: str,
        reason: str,
        receipt: Any = None,
    ) -> QuarantineReplay:
        """Record that an operator published ``record``'s message again (who,
        why, where, when, the transport's receipt) and mark the record resolved.
        The evidence is untouched: the replay is judged like any delivery."""
        who, why = audited(replayed_by, reason)
        values = {"destination": destination, "replayed_by": who, "reason": why}
        now = {"replayed_at": checked_now(self.clock), "receipt": receipt}
        return self._quarantine.record_replay(record, {**values, **now})

    def quarantine_replays(self, record_id: int) -> list[QuarantineReplay]:
        """The recorded replays of a quarantine record, oldest first."""
        return self._quarantine.replays(record_id)

    def quarantine_trails_of(
        self, consumer: str, command_id: str, *, through: int | None = None
    ) -> tuple[list[QuarantineReplay], list[QuarantineAction]]:
        """The replays and the actions of every quarantine record of one
        command (only those whose id is at most ``through``, when given),
        oldest first, in two queries whatever the number of records."""
        command = (consumer, command_id)
        return (
            self._quarantine.replays(None, command=command, through=through),
            self._quarantine.actions(None, command=command, through=through),
        )
