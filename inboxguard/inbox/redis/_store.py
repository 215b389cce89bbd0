"""What operators read and change in a Redis inbox: evidence, quarantine
records and their replays. Nothing here runs inside a guard."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Mapping
from typing import Any

from inboxguard._core.details import encode_details
from inboxguard.inbox._quarantine import QuarantineAction, QuarantineReplay
from inboxguard.inbox._records import InboxRecord, QuarantineRecord
from inboxguard.inbox.redis._keys import KeySpace, escape_pattern
from inboxguard.inbox.redis._scripts import FORGET, RESOLVE, run_script

__all__ = ["RedisRecords"]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _decoded(stored: Mapping[Any, Any]) -> dict[str, str]:
    return {_text(k): _text(v) for k, v in stored.items()}


def _when(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value) if value else None


def evidence_record(stored: Mapping[Any, Any]) -> InboxRecord | None:
    """An evidence hash as an :class:`~inboxguard.inbox.InboxRecord` (None when empty)."""
    values = _decoded(stored)
    if "digest" not in values:
        return None
    result = values.get("result")
    return InboxRecord(
        consumer=values.get("consumer", ""),
        command_id=values.get("command_id", ""),
        digest=values["digest"],
        result=json.loads(result) if result is not None else None,
        processed_at=dt.datetime.fromisoformat(values["processed_at"]),
        expires_at=dt.datetime.fromisoformat(values["expires_at"]),
        result_expires_at=_when(values.get("result_expires_at")),
    )


def _action(
    record: QuarantineRecord, item: Mapping[str, Any], fallback_id: int
) -> QuarantineAction:
    """A trail entry as the SQL inbox's :class:`~inboxguard.inbox.QuarantineAction`."""
    return QuarantineAction(
        id=int(item.get("id") or fallback_id),
        quarantine_id=record.id,
        consumer=record.consumer,
        command_id=record.command_id,
        action=str(item["action"]),
        actor=str(item.get("actor") or "unknown"),
        reason=str(item.get("reason") or ""),
        acted_at=dt.datetime.fromisoformat(item["acted_at"]),
        evidence_digest=item.get("evidence_digest") or None,
        evidence_processed_at=_when(item.get("evidence_processed_at")),
    )


def _quarantine_record(values: dict[str, str]) -> QuarantineRecord:
    details = values.get("details")
    return QuarantineRecord(
        id=int(values["id"]),
        consumer=values["consumer"],
        command_id=values["command_id"],
        reason=values["reason"],
        stored_digest=values.get("stored_digest") or None,
        incoming_digest=values["incoming_digest"],
        first_seen_at=dt.datetime.fromisoformat(values["first_seen_at"]),
        last_seen_at=dt.datetime.fromisoformat(values["last_seen_at"]),
        occurrences=int(values["occurrences"]),
        status=values["status"],
        details=json.loads(details) if details else None,
    )


class RedisRecords:
    """Evidence and quarantine of one key prefix, through a sync client."""

    def __init__(self, client: Any, keys: KeySpace) -> None:
        self._client = client
        self._keys = keys

    def evidence(self, key: str) -> InboxRecord | None:
        """The evidence stored at ``key``, or None."""
        return evidence_record(self._client.hgetall(key))

    def all_evidence(self, batch: int = 500) -> Iterator[InboxRecord]:
        """Every evidence record of the prefix (``SCAN``: proportional to the keyspace)."""
        for key in self._client.scan_iter(match=self._keys.evidence_pattern(), count=batch):
            record = self.evidence(_text(key))
            if record is not None:
                yield record

    def quarantine(
        self,
        consumer: str | None,
        status: str | None,
        *,
        record_id: int | None = None,
        limit: int | None = None,
        after: int | None = None,
    ) -> list[QuarantineRecord]:
        """Quarantine records, oldest (lowest id) first (only ids above ``after``)."""
        if record_id is not None:
            ids: list[Any] = [record_id]
        else:
            ids = list(self._client.zrange(self._keys.quarantine_index, 0, -1))
        if after is not None:
            ids = [found for found in ids if int(_text(found)) > after]
        pipe = self._client.pipeline(transaction=False)
        for found in ids:
            pipe.hgetall(self._keys.quarantine_record + _text(found))
        found_records: list[QuarantineRecord] = []
        for stored in pipe.execute():
            if not stored:
                continue
            record = _quarantine_record(_decoded(stored))
            if consumer is not None and record.consumer != consumer:
                continue
            if status is not None and record.status != status:
                continue
            found_records.append(record)
            if limit is not None and len(found_records) >= limit:
                break
        return found_records

    def resolve(self, record_id: int) -> bool:
        """Mark an open record resolved; False when none is open with that id."""
        key = self._keys.quarantine_record + str(int(record_id))
        return bool(run_script(self._client, RESOLVE, [key], []))

    def record_replay(
        self, record: QuarantineRecord, values: Mapping[str, Any]
    ) -> QuarantineReplay:
        """Append a replay of ``record`` and mark it resolved, in one ``MULTI``."""
        key = self._keys.quarantine_replays + str(record.id)
        replay_id = int(self._client.incr(self._keys.quarantine_seq + ":replays"))
        stored = {
            "id": replay_id,
            "destination": values["destination"],
            "replayed_by": values["replayed_by"],
            "reason": values["reason"],
            "replayed_at": values["replayed_at"].isoformat(),
            "receipt": encode_details({"receipt": values.get("receipt")}),
        }
        pipe = self._client.pipeline(transaction=True)
        pipe.rpush(key, json.dumps(stored))
        pipe.hset(self._keys.quarantine_record + str(record.id), "status", "resolved")
        pipe.execute()
        return self.replays(record)[-1]

    def replays(self, record: QuarantineRecord) -> list[QuarantineReplay]:
        """The replays of a record, oldest first."""
        key = self._keys.quarantine_replays + str(record.id)
        replays = []
        for raw in self._client.lrange(key, 0, -1):
            item = json.loads(_text(raw))
            receipt = json.loads(item["receipt"])["receipt"] if item["receipt"] else None
            replays.append(
                QuarantineReplay(
                    id=int(item["id"]),
                    quarantine_id=record.id,
                    consumer=record.consumer,
                    command_id=record.command_id,
                    destination=item["destination"],
                    replayed_by=item["replayed_by"],
                    reason=item["reason"],
                    replayed_at=dt.datetime.fromisoformat(item["replayed_at"]),
                    receipt=receipt,
                )
            )
        return replays

    def settle(
        self,
        record: QuarantineRecord,
        action: str,
        actor: str,
        reason: str,
        now: dt.datetime,
        evidence_key: str,
    ) -> QuarantineAction | None:
        """Resolve an open record and append ``action`` to its trail; a release
        of a payload mismatch also deletes the evidence that refuses the
        record's payload. None when the record was not open.

        Three steps, each atomic (the record's keys and the evidence key may be
        in different cluster slots): the resolution, which only one operator
        wins; the compare-and-delete of the evidence; the trail entry.
        """
        if not self.resolve(record.id):
            return None
        removed: list[Any] = []
        if action == "release" and record.reason == "payload_mismatch":
            reply = run_script(self._client, FORGET, [evidence_key], [record.incoming_digest])
            removed = [_text(v) for v in reply or []]
        action_id = int(self._client.incr(self._keys.quarantine_seq + ":actions"))
        item = {
            "id": action_id,
            "action": action,
            "actor": actor,
            "reason": reason,
            "acted_at": now.isoformat(),
            "evidence_digest": removed[0] if removed else None,
            "evidence_processed_at": (removed[1] or None) if removed else None,
        }
        self._client.rpush(self._keys.quarantine_actions + str(record.id), json.dumps(item))
        return _action(record, item, action_id)

    def actions(self, record: QuarantineRecord) -> list[QuarantineAction]:
        """The operator actions on a record, oldest first."""
        key = self._keys.quarantine_actions + str(record.id)
        raw_items = self._client.lrange(key, 0, -1)
        return [
            _action(record, json.loads(_text(raw)), position)
            for position, raw in enumerate(raw_items, start=1)
        ]

    def drop(self, batch: int = 500) -> int:
        """Delete every key of the prefix (evidence, leases, quarantine); return how many."""
        pattern = escape_pattern(self._keys.prefix) + "*"
        deleted = 0
        chunk: list[Any] = []
        for key in self._client.scan_iter(match=pattern, count=batch):
            chunk.append(key)
            if len(chunk) >= batch:
                deleted += int(self._client.delete(*chunk))
                chunk = []
        if chunk:
            deleted += int(self._client.delete(*chunk))
        return deleted
