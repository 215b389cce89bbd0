"""The Redis inbox: the inbox's guarantee where the consumer's state and the
evidence live in Redis and ``MULTI``/``EXEC`` is the transaction.

The store-specific I/O lives here (keys, Lua scripts, the two drivers, the
server checks); every decision is the inbox's own (:mod:`inboxguard.inbox._decide`).
"""

from __future__ import annotations

from inboxguard.inbox.redis import _operations as operations
from inboxguard.inbox.redis._inbox import RedisInbox
from inboxguard.inbox.redis._operations import RedisConsumerStats, RedisExplanation, RedisStats
from inboxguard.inbox.redis._server import (
    RedisDurability,
    RedisDurabilityWarning,
    client_from_url,
    error_kind,
    volatile_problem,
)

__all__ = [
    "RedisConsumerStats",
    "RedisDurability",
    "RedisDurabilityWarning",
    "RedisExplanation",
    "RedisInbox",
    "RedisStats",
    "client_from_url",
    "error_kind",
    "operations",
    "volatile_problem",
]
