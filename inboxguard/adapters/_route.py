"""Where a retry copy goes: back to the queue its delivery came from, never a guess.

RabbitMQ's default exchange routes a message to the queue named by its
routing key. A delivery that came through another exchange (a topic
exchange under ``payment.created``) has a routing key that names no queue,
and that exchange may route the key to other queues as well: a copy sent
under that key on the default exchange is dropped, and one sent back to the
delivery's exchange also reaches every other queue bound there (another
consumer group gets a message it already had, with a bumped attempt). So a
copy goes to the default exchange under the consumed queue's own name when
the queue is known; under the delivery's own routing key only when the
delivery itself came through the default exchange (its key is then the
queue's name) or when the copy goes to a named exchange of the user's
choice. Otherwise there is no route, and the adapter hands the original
back to the broker instead of copying it. Imports no framework.
"""

from __future__ import annotations

from inboxguard.errors import ConfigurationError

__all__ = ["queue_name", "retry_key"]


def queue_name(queue: object) -> str | None:
    """The queue's name, from a name or a client's queue object (``queue.name``).

    Raises:
        ConfigurationError: ``queue`` is neither.
    """
    if queue is None:
        return None
    name = queue if isinstance(queue, str) else getattr(queue, "name", None)
    if not isinstance(name, str) or not name:
        msg = f"queue must be the consumed queue's name or the queue object, got {queue!r}"
        raise ConfigurationError(msg)
    return name


def retry_key(
    exchange: str, queue: str | None, came_through: str | None, routing_key: str | None
) -> str | None:
    """The routing key a retry copy is published under on ``exchange`` (``""``:
    the default exchange), for a delivery that ``came_through`` an exchange
    under ``routing_key`` from ``queue`` (None: not known); None when no key
    is known to reach that queue alone."""
    if exchange:  # a named exchange the user chose routes the delivery's key
        return routing_key or ""
    if queue is not None:
        return queue
    if not came_through:  # came through the default exchange: its key names the queue
        return routing_key or ""
    return None
