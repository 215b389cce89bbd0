"""The quarantine half of :class:`inboxguard.RedisInbox`: refusing a delivery
durably, reading the records and their audit trails, and the operator's
resolve, release and replay, as :class:`inboxguard.Inbox` offers them.

:class:`RedisQuarantineMethods` holds these methods; :class:`~inboxguard.RedisInbox`
inherits them, so its guard entry points stay in a module of their own (the
SQL inbox is split the same way, ``inbox/_inbox_quarantine.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from inboxguard._core.clock import Clock, checked_now
from inboxguard.inbox._quarantine import QuarantineAction, QuarantineReplay, audited
from inboxguard.inbox._records import QuarantineReason, QuarantineRecord
from inboxguard.inbox.redis._drive import write_quarantine
from inboxguard.inbox.redis._flow import RedisFlows
from inboxguard.inbox.redis._keys import KeySpace
from inboxguard.inbox.redis._store import RedisRecords

__all__ = ["RedisQuarantineMethods"]


class RedisQuarantineMethods:
    """The quarantine methods of :class:`inboxguard.RedisInbox` (see there)."""

    client: Any
    keys: KeySpace
    clock: Clock
    _flows: RedisFlows
    _records: RedisRecords

    # -- quarantine ------------------------------------------------------------------------

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
        """Refuse a delivery durably: write (or count again) its quarantine
        record, outside any transaction and with no expiry. False (the record
        logged at ERROR) when the write failed.

        Raises:
            InvalidCommandError: ``consumer`` or ``command_id`` is unusable.
            PayloadEncodingError: the payload has no canonical encoding.
        """
        request = self._flows.quarantine(consumer, command_id, payload, reason, exclude, details)
        return write_quarantine(self.client, self.keys, request.values)

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
        return self._records.quarantine(consumer, status, limit=limit, after=after)

    def quarantine_count(self, consumer: str | None = None, *, status: str | None = "open") -> int:
        """How many quarantine records :meth:`quarantined` would list without a limit."""
        return len(self._records.quarantine(consumer, status))

    def quarantine_record(self, record_id: int) -> QuarantineRecord | None:
        """Return the quarantine record with this id, whatever its status, or None."""
        found = self._records.quarantine(None, None, record_id=record_id)
        return found[0] if found else None

    def resolve_quarantine(
        self, record_id: int, *, actor: str | None = None, reason: str | None = None
    ) -> bool:
        """Mark an open quarantine record resolved; False if none is open with that id.

        With ``actor`` and ``reason`` the resolution is also recorded in the
        record's trail (:meth:`quarantine_actions`), as in
        :meth:`inboxguard.Inbox.resolve_quarantine`. The evidence is untouched.

        Raises:
            ConfigurationError: only one of ``actor`` and ``reason`` is given.
        """
        if actor is None and reason is None:
            return self._records.resolve(record_id)
        return self._settle(record_id, "resolve", actor, reason) is not None

    def record_quarantine_replay(
        self,
        record: QuarantineRecord,
        *,
        destination: str,
        replayed_by: str,
        reason: str,
        receipt: Any = None,
    ) -> QuarantineReplay:
        """Record an operator's replay of ``record`` and mark it resolved
        (see :meth:`inboxguard.Inbox.record_quarantine_replay`)."""
        values = {"destination": destination, "replayed_by": replayed_by, "reason": reason}
        now = {"replayed_at": checked_now(self.clock), "receipt": receipt}
        return self._records.record_replay(record, {**values, **now})

    def quarantine_records_of(self, consumer: str, command_id: str) -> list[QuarantineRecord]:
        """Every quarantine record of one command, whatever its status, oldest first."""
        found = self._records.quarantine(consumer, None)
        return [record for record in found if record.command_id == command_id]

    def release_quarantine(
        self, record_id: int, *, actor: str, reason: str
    ) -> QuarantineAction | None:
        """Let a quarantined command be processed again: resolve the open record
        and, for a payload mismatch, delete the command's evidence whose digest
        is not the refused one, recording who, why and when
        (:meth:`quarantine_actions`), as :meth:`inboxguard.Inbox.release_quarantine`.
        None when no record is open with that id.

        Raises:
            ConfigurationError: ``actor`` or ``reason`` is empty.
        """
        return self._settle(record_id, "release", actor, reason)

    def _settle(
        self, record_id: int, action: str, actor: str | None, reason: str | None
    ) -> QuarantineAction | None:
        who, why = audited(actor, reason)
        record = self.quarantine_record(record_id)
        if record is None or record.status != "open":
            return None
        evidence = self.keys.command(record.consumer, record.command_id).evidence
        return self._records.settle(record, action, who, why, checked_now(self.clock), evidence)

    def quarantine_actions(self, record_id: int) -> list[QuarantineAction]:
        """The recorded releases and resolutions of a record, oldest first."""
        record = self.quarantine_record(record_id)
        return [] if record is None else self._records.actions(record)

    def quarantine_replays(self, record_id: int) -> list[QuarantineReplay]:
        """The recorded replays of a quarantine record, oldest first."""
        record = self.quarantine_record(record_id)
        return [] if record is None else self._records.replays(record)
