"""Outbox transport for kombu: ``Producer.publish`` under the command ID.

The command ID is the AMQP ``message_id`` property and the
``x-inbox-command-id`` header; the digest is ``x-inbox-digest``. The body is
the payload as JSON, persistent (``delivery_mode=2``). ``destination`` is the
routing key (with the default exchange: the queue name).

On RabbitMQ (an ``amqp://`` connection) every publish is ``mandatory`` and
confirmed: the transport turns on publisher confirms (``confirm_publish`` in
the connection's transport options; an explicit ``False`` is refused), so
``publish`` returns only once the broker took the message, and a message the
broker returns because no queue is bound to its routing key raises
:class:`~inboxguard.errors.UnroutableMessageError`: the row is not delivered
and is retried with backoff, then dead. Declare the destination queues
(``declare=``) so a dispatcher that starts before its consumers still has
somewhere to route to.

On Redis (and kombu's other virtual transports) the default exchange pushes
the message onto a list named by ``destination``, whether or not a consumer
reads it: nothing is dropped, but a misspelt destination waits in a list no
one reads, and no broker can tell the transport. Watch queue lengths there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kombu.connection import Connection
from kombu.entity import Exchange, Queue

from inboxguard.errors import ConfigurationError, UnroutableMessageError
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
        declare: queues (or exchanges) declared before each publish
            (kombu declares each entity once per channel); on RabbitMQ, a
            publish no declared or bound queue receives fails.
        retry_policy: kombu ``ensure`` policy for a lost connection.

    Raises:
        ConfigurationError: an AMQP connection with ``confirm_publish=False``,
            or one already open without confirms.
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
        self._confirmed = _require_confirms(connection)
        self.exchange = exchange
        self.declare = list(declare)
        self.retry_policy = dict(DEFAULT_RETRY_POLICY if retry_policy is None else retry_policy)
        self._producer: Any = None
        self._returned: dict[str, str] = {}

    def __call__(self, message: OutboxMessage) -> dict[str, Any]:
        """Publish; return ``{"message_id": ..., "routing_key": ...}``.

        Raises:
            UnroutableMessageError: RabbitMQ returned the message (no queue
                is bound to its routing key on the exchange).
        """
        if self._producer is None:
            on_return = self._on_return if self._confirmed else None  # AMQP channels only
            self._producer = self.connection.Producer(on_return=on_return)
        self._returned.pop(message.command_id, None)
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
            mandatory=self._confirmed,
        )
        # With confirms, RabbitMQ sends a return before the confirm, and the
        # confirm's wait dispatched it to _on_return.
        returned = self._returned.pop(message.command_id, None)
        if returned is not None:
            msg = (
                f"the broker returned command {message.command_id!r}: {returned}; no queue"
                f" is bound to routing key {message.destination!r}"
                f" on exchange {_name(self.exchange)!r}: declare the queue (declare=[Queue(...)])"
                " or fix the row's destination"
            )
            raise UnroutableMessageError(msg, destination=message.destination)
        return {"message_id": message.command_id, "routing_key": message.destination}

    def _on_return(self, exc: Any, exchange: str, routing_key: str, message: Any) -> None:
        message_id = message.properties.get("message_id")
        if message_id is not None:
            self._returned[str(message_id)] = str(exc)

    def close(self) -> None:
        """Release the producer's channel and the connection."""
        if self._producer is not None:
            self._producer.release()
            self._producer = None
        self.connection.release()


def _name(exchange: Exchange | str) -> str:
    return exchange if isinstance(exchange, str) else str(exchange.name)


def _require_confirms(connection: Any) -> bool:
    """Turn publisher confirms on for an AMQP connection; True when it is one.

    Raises:
        ConfigurationError: confirms were explicitly turned off, or the
            connection is already open without them.
    """
    if connection.transport.driver_type != "amqp":
        return False
    options = connection.transport_options
    if options.get("confirm_publish") is False:
        msg = (
            "KombuTransport needs publisher confirms on RabbitMQ: without them a"
            " message the broker drops or returns would be recorded as delivered;"
            " remove confirm_publish=False from the connection's transport_options"
        )
        raise ConfigurationError(msg)
    if not options.get("confirm_publish") and connection.connected:
        msg = (
            "KombuTransport needs publisher confirms on RabbitMQ, and this connection is"
            " already open without them; pass a new Connection(...,"
            ' transport_options={"confirm_publish": True})'
        )
        raise ConfigurationError(msg)
    options["confirm_publish"] = True
    return True
