"""FastStream adapter: one inbox middleware for RabbitMQ, Redis Streams,
NATS JetStream and Kafka.

Usage::

    guard = InboxMiddleware(
        inbox,
        consumer="billing.charge",
        command_id="command_id",
        async_session_factory=async_sessionmaker(async_engine),
    )
    broker = RabbitBroker(url, middlewares=[guard])
    app = FastStream(broker, on_startup=[lambda: guard.check_startup(broker)])

    @broker.subscriber("charges")
    async def charge(body: dict) -> dict:
        session = inboxguard.current_session()
        ...

See ``docs/adapters/faststream.md`` for the outcomes and their guarantees.
"""

from __future__ import annotations

from typing import Any

from faststream import BaseMiddleware

from inboxguard.adapters._delivery import (
    ATTEMPT_HEADER,
    COMMAND_ID_HEADER,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_RETRY_DELAY,
    RETRY_AT_HEADER,
    SENT_AT_HEADER,
)
from inboxguard.adapters.faststream._kafka_batch import current_batch
from inboxguard.adapters.faststream._middleware import InboxMiddleware, stamp_sent_at
from inboxguard.adapters.faststream._options import inbox_consumer

__all__ = [
    "ATTEMPT_HEADER",
    "COMMAND_ID_HEADER",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_RETRY_DELAY",
    "RETRY_AT_HEADER",
    "SENT_AT_HEADER",
    "InboxMiddleware",
    "SentAtMiddleware",
    "current_batch",
    "inbox_consumer",
]


class SentAtMiddleware(BaseMiddleware):
    """A producer-side middleware: stamps ``x-inbox-sent-at`` (now, UTC) on
    every publish that has none, so the consumer's inbox can refuse a replay
    older than its evidence. :class:`InboxMiddleware` stamps it too."""

    async def publish_scope(self, call_next: Any, cmd: Any) -> Any:
        """Stamp, then publish."""
        stamp_sent_at(cmd)
        return await call_next(cmd)
