"""Where a retry copy goes: back to the queue its delivery came from, never a guess.

RabbitMQ's default exchange routes a message to the queue named by its
routing key. A delivery that came through another exchange (a topic
exchange under ``payment.created``) has a routing key naming no queue: a
copy sent to the default exchange under that key would be dropped. So a
copy goes to the default exchange under the consumed queue's own name when
``queue`` is given; to the delivery's own routing key only when the
delivery itself came through the default exchange (its key is then the
queue's name) or when the copy goes to a named exchange of the user's
choice. Every copy is published ``mandatory``: a copy the broker returns
as unroutable is not a retry, and the original is handed back instead of
being acked.
"""

from __future__ import annotations

from typing import Any

from aio_pika.abc import AbstractExchange, AbstractIncomingMessage
from aiormq.abc import DeliveredMessage

__all__ = ["copy_published", "queue_name", "routing_key_of"]


def queue_name(queue: object) -> str | None:
    """The queue's name, from a name or an aio-pika queue (``queue.name``).

    Raises:
        TypeError: ``queue`` is neither (turned into a ConfigurationError by
            the caller).
    """
    if queue is None:
        return None
    name = queue if isinstance(queue, str) else getattr(queue, "name", None)
    if not isinstance(name, str) or not name:
        msg = f"queue must be the consumed queue's name or the aio-pika queue, got {queue!r}"
        raise TypeError(msg)
    return name


def routing_key_of(
    exchange: AbstractExchange, queue: str | None, message: AbstractIncomingMessage
) -> str | None:
    """The routing key a copy of ``message`` is published under on
    ``exchange``, or None when no key is known to reach the queue."""
    if exchange.name:  # a named exchange the user chose routes the delivery's key
        return message.routing_key or ""
    if queue is not None:
        return queue
    if not message.exchange:  # came through the default exchange: its key names the queue
        return message.routing_key or ""
    return None


def copy_published(result: Any) -> bool:
    """Whether the broker took a mandatory copy: a confirm, or no confirms
    on the channel (``None``); a message it returned as unroutable is not."""
    return not isinstance(result, DeliveredMessage)
