"""The operator's read model of a Redis inbox: ``stats`` and ``explain``,
shaped like the SQL inbox's (``inboxguard.operations``) so one CLI and one
dashboard can show both. Read-only; evidence is found with ``SCAN``, whose
cost grows with the whole keyspace (an operator's command, not a hot path).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from inboxguard._core.clock import Clock, checked_now, utc_now
from inboxguard.inbox._records import InboxRecord, QuarantineRecord

__all__ = ["RedisConsumerStats", "RedisExplanation", "RedisStats", "explain", "stats"]


@dataclass(frozen=True, slots=True)
class RedisConsumerStats:
    """One consumer's Redis inbox: ``processed`` evidence keys, ``quarantined``
    open records, the oldest evidence and its age (None without evidence)."""

    consumer: str
    processed: int
    quarantined: int
    oldest_processed_at: dt.datetime | None
    oldest_evidence_age: dt.timedelta | None


@dataclass(frozen=True, slots=True)
class RedisStats:
    """One reading of a Redis inbox, taken ``at`` (UTC), with the server's
    durability (a plain dict of :class:`RedisDurability`)."""

    at: dt.datetime
    key_prefix: str
    consumers: tuple[RedisConsumerStats, ...]
    durability: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RedisExplanation:
    """Why a command was, or would be, skipped, as of ``at``: ``verdict`` is
    ``"duplicate"`` (evidence stored) or ``"fresh"``; ``summary`` says it in
    one sentence; ``quarantine`` holds every record of the command."""

    consumer: str
    command_id: str
    at: dt.datetime
    verdict: str
    summary: str
    evidence: InboxRecord | None
    quarantine: tuple[QuarantineRecord, ...]


def stats(inbox: Any, *, clock: Clock | None = None) -> RedisStats:
    """Count a :class:`~inboxguard.RedisInbox`'s evidence and open quarantine per consumer."""
    now = checked_now(clock or utc_now)
    processed: dict[str, int] = {}
    oldest: dict[str, dt.datetime] = {}
    for record in inbox.evidence():
        processed[record.consumer] = processed.get(record.consumer, 0) + 1
        if record.consumer not in oldest or record.processed_at < oldest[record.consumer]:
            oldest[record.consumer] = record.processed_at
    open_counts: dict[str, int] = {}
    for found in inbox.quarantined(None, status="open"):
        open_counts[found.consumer] = open_counts.get(found.consumer, 0) + 1
    consumers = tuple(
        RedisConsumerStats(
            consumer,
            processed.get(consumer, 0),
            open_counts.get(consumer, 0),
            oldest.get(consumer),
            now - oldest[consumer] if consumer in oldest else None,
        )
        for consumer in sorted(processed.keys() | open_counts.keys())
    )
    return RedisStats(now, inbox.key_prefix, consumers, inbox.durability().as_dict())


def explain(
    inbox: Any,
    *,
    consumer: str,
    command_id: str,
    hash_tag: str | None = None,
    clock: Clock | None = None,
) -> RedisExplanation:
    """Explain the Redis inbox's decision for ``command_id`` at ``consumer``
    (``hash_tag``, when given, must be the command ID's own tag)."""
    now = checked_now(clock or utc_now)
    evidence = inbox.lookup(consumer, command_id, hash_tag=hash_tag)
    records = tuple(inbox.quarantine_records_of(consumer, command_id))
    open_count = sum(1 for r in records if r.status == "open")
    waiting = f"; {open_count} quarantine record(s) are open" if open_count else ""
    if evidence is None:
        verdict = "fresh"
        summary = (
            "no evidence is stored: the next delivery is processed, unless its sent time is"
            f" older than the retention horizon (then it is quarantined){waiting}"
        )
    else:
        verdict = "duplicate"
        summary = (
            f"processed at {evidence.processed_at.isoformat()}: a delivery whose payload digest"
            f" is {evidence.digest} is skipped as a duplicate; any other payload is quarantined"
            f" as payload_mismatch; the evidence key expires about"
            f" {evidence.expires_at.isoformat()}{waiting}"
        )
    return RedisExplanation(consumer, command_id, now, verdict, summary, evidence, records)
