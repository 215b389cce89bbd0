"""aio-pika's side of a retry copy's route (``inboxguard.adapters._route``
decides it): the routing key on the exchange the callback was given, and
whether the broker took the copy. Every copy is published ``mandatory``: a
copy the broker returns as unroutable is not a retry, and the original is
handed back instead of being acked.
"""

from __future__ import annotations

from typing import Any

from aio_pika.abc import AbstractExchange, AbstractIncomingMessage
from aiormq.abc import DeliveredMessage

from inboxguard.adapters._route import queue_name, retry_key

__all__ = ["copy_published", "queue_name", "routing_key_of"]


def routing_key_of(
    exchange: AbstractExchange, queue: str | None, message: AbstractIncomingMessage
) -> str | None:
    """The routing key a copy of ``message`` is published under on
    ``exchange``, or None when no key is known to reach the queue."""
    return retry_key(exchange.name, queue, message.exchange, message.routing_key)


def copy_published(result: Any) -> bool:
    """Whether the broker took a mandatory copy: a confirm, or no confirms
    on the channel (``None``); a message it returned as unroutable is not."""
    return not isinstance(result, DeliveredMessage)
