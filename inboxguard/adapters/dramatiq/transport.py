"""Outbox transport for Dramatiq: ``broker.enqueue`` with a stable message id.

The message's ``message_id`` is the command ID itself (Dramatiq keeps it
across retries, and a resend after a dispatcher crash carries it again), and
its options hold ``inbox_command_id``, ``inbox_digest`` and the row's
headers (``inbox_headers``). ``destination`` is the actor name; the queue is
the declared actor's, or ``queue_name`` when the actor lives only in the
consumer's code.

On RabbitMQ the transport needs ``RabbitmqBroker(confirm_delivery=True)``
(a broker without it is refused): each enqueue then waits for the broker's
confirm, and Dramatiq publishes ``mandatory``, so a message RabbitMQ cannot
route raises and the row is retried, never recorded as delivered. The Redis
broker's enqueue is one acknowledged Lua call.

What the transport can and cannot see:

- Queues: on RabbitMQ, Dramatiq declares the queue before it publishes; on
  Redis nothing is declared or routed: the message is written to the keys of
  the queue it names. Either way a message always lands in a queue, so a
  misspelt ``queue_name`` fills a queue nobody consumes, and no broker can
  tell the producer.
- Actors: ``destination`` must name an actor declared on the broker in the
  dispatcher's process, unless ``queue_name`` is given; an undeclared actor
  without ``queue_name`` fails the send (``ConfigurationError``, retried, then
  dead). With ``queue_name``, an actor no worker declares reaches the queue
  and the worker skips it as unknown.
"""

from __future__ import annotations

from typing import Any

import dramatiq
from dramatiq.errors import ActorNotFound

from inboxguard.adapters._transport import split_payload
from inboxguard.errors import ConfigurationError
from inboxguard.outbox import OutboxMessage

__all__ = ["DramatiqTransport"]


class DramatiqTransport:
    """``transport(message)`` that enqueues a Dramatiq message for ``destination``.

    Args:
        broker: the broker to enqueue on.
        queue_name: queue for actors not declared on ``broker`` in this
            process (the default is the declared actor's queue).

    Raises:
        ConfigurationError: a RabbitMQ broker without ``confirm_delivery``.
    """

    def __init__(self, broker: dramatiq.Broker, *, queue_name: str | None = None) -> None:
        if getattr(broker, "confirm_delivery", None) is False:
            msg = (
                "DramatiqTransport needs RabbitmqBroker(confirm_delivery=True): without"
                " confirms a message the broker never took, or could not route, would be"
                " recorded as delivered"
            )
            raise ConfigurationError(msg)
        self.broker = broker
        self.queue_name = queue_name

    def __call__(self, message: OutboxMessage) -> dict[str, Any]:
        """Enqueue; return ``{"message_id": ..., "queue_name": ...}``."""
        args, kwargs = split_payload(message.payload)
        queue = self._queue_for(message.destination)
        sent = self.broker.enqueue(
            dramatiq.Message(
                queue_name=queue,
                actor_name=message.destination,
                args=tuple(args),
                kwargs=kwargs,
                options={
                    "inbox_command_id": message.command_id,
                    "inbox_digest": message.digest,
                    "inbox_headers": dict(message.headers),
                },
                message_id=message.command_id,
            )
        )
        receipt = {"message_id": sent.message_id, "queue_name": sent.queue_name}
        redis_id = sent.options.get("redis_message_id")
        if redis_id is not None:
            receipt["redis_message_id"] = redis_id
        return receipt

    def _queue_for(self, actor_name: str) -> str:
        try:
            return str(self.broker.get_actor(actor_name).queue_name)
        except ActorNotFound:
            if self.queue_name is None:
                msg = (
                    f"actor {actor_name!r} is not declared on this broker; declare it in the"
                    " dispatcher's process or pass DramatiqTransport(..., queue_name=...)"
                )
                raise ConfigurationError(msg) from None
            return self.queue_name
