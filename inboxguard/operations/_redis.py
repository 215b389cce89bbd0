"""The read model of a :class:`~inboxguard.RedisInbox`: the same values the
SQL branch returns, read through the inbox's own methods (its store-specific
counting lives in :mod:`inboxguard.inbox.redis`)."""

from __future__ import annotations

from inboxguard._core.clock import Clock, checked_now, utc_now
from inboxguard.inbox import QuarantineRecord
from inboxguard.inbox.redis import RedisInbox, operations
from inboxguard.operations._records import (
    CommandExplanation,
    ConsumerStats,
    QuarantineDetail,
    Stats,
)

__all__ = ["explain_redis", "quarantine_detail_redis", "stats_redis"]


def stats_redis(inbox: RedisInbox, clock: Clock | None) -> Stats:
    """:func:`inboxguard.stats` of a Redis inbox (no outbox or ledger in Redis)."""
    found = operations.stats(inbox, clock=clock)
    consumers = tuple(
        ConsumerStats(
            c.consumer, c.processed, c.quarantined, c.oldest_processed_at, c.oldest_evidence_age
        )
        for c in found.consumers
    )
    return Stats(found.at, found.key_prefix, consumers, None, None, found.durability)


def explain_redis(
    inbox: RedisInbox,
    consumer: str,
    command_id: str,
    hash_tag: str | None,
    clock: Clock | None,
) -> CommandExplanation:
    """:func:`inboxguard.explain` of a Redis inbox (no effects or outbox row)."""
    now = checked_now(clock or utc_now)
    told = operations.explain(
        inbox, consumer=consumer, command_id=command_id, hash_tag=hash_tag, clock=lambda: now
    )
    quarantine = tuple(quarantine_detail_redis(inbox, r) for r in told.quarantine)
    return CommandExplanation(
        consumer, command_id, now, told.verdict, told.summary, told.evidence, quarantine, (), None
    )


def quarantine_detail_redis(inbox: RedisInbox, record: QuarantineRecord) -> QuarantineDetail:
    """``record`` with its replays and actions, as the SQL branch returns it."""
    replays = tuple(inbox.quarantine_replays(record.id))
    return QuarantineDetail(record, replays, tuple(inbox.quarantine_actions(record.id)))
