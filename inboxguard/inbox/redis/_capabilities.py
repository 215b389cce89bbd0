"""What a :class:`~inboxguard.RedisInbox` can do, and what it refuses."""

from __future__ import annotations

from inboxguard.inbox._store import StoreCapabilities

__all__ = ["CAPABILITIES", "NO_BATCH"]

#: What a Redis inbox can do: pipelines (sync and redis.asyncio), hash tags,
#: key scans; no batch claim, no partitions, no SQLAlchemy sessions.
CAPABILITIES = StoreCapabilities(
    store="redis",
    local="redis",
    transaction="pipeline",
    async_guard=True,
    async_sessions=False,
    batch=False,
    partitioning=False,
    hash_tags=True,
    key_scan=True,
)

#: Why a batch claim is refused.
NO_BATCH = (
    "RedisInbox claims one command per EXEC (capabilities.batch is False): guard each"
    " command with inbox.guard(), or use an inboxguard.Inbox for guard_batch()"
)
