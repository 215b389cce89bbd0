"""The transactional outbox and its dispatcher.

:class:`Outbox` stores outgoing commands in the caller's transaction;
:class:`Dispatcher` delivers them at least once, each under its business
command ID, for the receiving inbox to deduplicate.
"""

from __future__ import annotations

from inboxguard.outbox._dispatcher import Dispatcher, DispatchStats, exponential_backoff
from inboxguard.outbox._outbox import Outbox
from inboxguard.outbox._records import (
    HEADER_COMMAND_ID,
    HEADER_DIGEST,
    HEADER_SENT_AT,
    CompactionResult,
    OutboxMessage,
    OutboxRow,
    OutboxStatus,
    Transport,
)

__all__ = [
    "HEADER_COMMAND_ID",
    "HEADER_DIGEST",
    "HEADER_SENT_AT",
    "CompactionResult",
    "DispatchStats",
    "Dispatcher",
    "Outbox",
    "OutboxMessage",
    "OutboxRow",
    "OutboxStatus",
    "Transport",
    "exponential_backoff",
]
