"""The read model of a store given in place of an engine (a
:class:`~inboxguard.RedisInbox`): the same values the SQL branch returns,
read through the store's own methods (a key-scanning store's counting lives
in :mod:`inboxguard.inbox.redis`)."""

from __future__ import annotations

from inboxguard._core.clock import Clock, checked_now, utc_now
from inboxguard.errors import ConfigurationError
from inboxguard.inbox import InboxStore, QuarantineRecord
from inboxguard.inbox.redis import operations
from inboxguard.operations._records import (
    CommandExplanation,
    ConsumerStats,
    QuarantineDetail,
    Stats,
)

__all__ = ["explain_redis", "quarantine_detail_redis", "stats_redis"]


def _scanned(inbox: InboxStore, what: str) -> None:
    if not inbox.capabilities.key_scan:
        msg = (
            f"{what} reads a {inbox.capabilities.store} store through its database: pass its"
            " engine (and table_prefix) instead of the store"
        )
        raise ConfigurationError(msg)


def stats_redis(inbox: InboxStore, clock: Clock | None) -> Stats:
    """:func:`inboxguard.stats` of a key-scanning store (no outbox or ledger in Redis).

    Raises:
        ConfigurationError: the store is read through its database's tables.
    """
    _scanned(inbox, "stats()")
    found = operations.stats(inbox, clock=clock)
    consumers = tuple(
        ConsumerStats(
            c.consumer, c.processed, c.quarantined, c.oldest_processed_at, c.oldest_evidence_age
        )
        for c in found.consumers
    )
    return Stats(found.at, found.key_prefix, consumers, None, None, found.durability)


def explain_redis(
    inbox: InboxStore,
    consumer: str,
    command_id: str,
    hash_tag: str | None,
    clock: Clock | None,
    limit: int,
) -> CommandExplanation:
    """:func:`inboxguard.explain` of a key-scanning store (no effects or outbox
    row), with the oldest ``limit`` quarantine records.

    Raises:
        ConfigurationError: the store is read through its database's tables.
    """
    _scanned(inbox, "explain()")
    now = checked_now(clock or utc_now)
    told = operations.explain(
        inbox, consumer=consumer, command_id=command_id, hash_tag=hash_tag, clock=lambda: now
    )
    quarantine = tuple(quarantine_detail_redis(inbox, r) for r in told.quarantine[:limit])
    return CommandExplanation(
        consumer,
        command_id,
        now,
        told.verdict,
        told.summary,
        told.evidence,
        quarantine,
        (),
        None,
        quarantine_total=len(told.quarantine),
        quarantine_open=sum(1 for r in told.quarantine if r.status == "open"),
    )


def quarantine_detail_redis(inbox: InboxStore, record: QuarantineRecord) -> QuarantineDetail:
    """``record`` with its replays and actions, as the SQL branch returns it."""
    replays = tuple(inbox.quarantine_replays(record.id))
    return QuarantineDetail(record, replays, tuple(inbox.quarantine_actions(record.id)))
