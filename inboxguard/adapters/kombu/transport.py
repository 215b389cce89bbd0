"""Outbox transport for kombu: ``Producer.publish`` under the command ID.

The command ID is the AMQP ``message_id`` property and the
``x-inbox-command-id`` header; the digest is ``x-inbox-digest``. The body is
the payload as JSON, persistent (``delivery_mode=2``). ``destination`` is the
routing key (with the default exchange: the queue name).

Open the connection with ``transport_options={"confirm_publish": True}`` on
RabbitMQ so that ``publish`` returns only after the broker confirmed the
message; only then is the receipt worth recording.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kombu.connection import Connection
from kombu.entity import Exchange, Queue

from inboxguard.outbox import OutboxMessage

__all__ = ["KombuTransport"]

#: Publish retries before the dispatcher sees the failure (and backs off).
DEFAULT_RETRY_POLICY: Mapping[str, Any] = {
    "max_retries": 2,
    "interval_start": 0.1,
    "interval_step": 0.5,
    "interval_max": 1.0,
}


class KombuTransport:
    """``transport(message)`` that publishes the payload with kombu.

    Args:
        connection: a kombu ``Connection`` owned by this transport.
        exchange: exchange to publish to (default: the default exchange, so
            ``destination`` names the queue).
        declare: queues (or exchanges) declared before the first publish.
        retry_policy: kombu ``ensure`` policy for a lost connection.
    """

    def __init__(
        self,
        connection: Connection,
        *,
        exchange: Exchange | str = "",
        declare: Iterable[Queue | Exchange] = (),
        retry_policy: Mapping[str, Any] | None = None,
    ) -> None:
        self.connection: Any = connection
        self.exchange = exchange
        self.declare = list(declare)
        self.retry_policy = dict(DEFAULT_RETRY_POLICY if retry_policy is None else retry_policy)
        self._producer: Any = None

    def __call__(self, message: OutboxMessage) -> dict[str, Any]:
        """Publish; return ``{"message_id": ..., "routing_key": ...}``."""
        if self._producer is None:
            self._producer = self.connection.Producer()
        self._producer.publish(
            message.payload,
            routing_key=message.destination,
            exchange=self.exchange,
            serializer="json",
            headers=dict(message.headers),
            message_id=message.command_id,
            delivery_mode=2,
            declare=self.declare,
            retry=True,
            retry_policy=self.retry_policy,
        )
        return {"message_id": message.command_id, "routing_key": message.destination}

    def close(self) -> None:
        """Release the producer's channel and the connection."""
        if self._producer is not None:
            self._producer.release()
            self._producer = None
        self.connection.release()
