"""Outbox transport for FastStream: ``broker.publish`` under the command ID.

The dispatcher is synchronous; this transport owns an event loop on a thread
of its own, connects the broker there on first use and waits for each
publish. Every message carries the command ID in ``x-inbox-command-id`` (and
as its correlation ID; on RabbitMQ also its ``message_id``), the payload
digest in ``x-inbox-digest`` and the commit time in ``x-inbox-sent-at``, so
the receiving :class:`~inboxguard.adapters.faststream.InboxMiddleware`
deduplicates a resend and judges its age.

What "the broker has it" means, per broker:

* RabbitMQ: a persistent, ``mandatory`` publish to the queue named by the
  row's ``destination`` (default exchange), confirmed by the broker
  (FastStream opens channels with publisher confirms). A message RabbitMQ
  returns because no queue is bound raises
  :class:`~inboxguard.errors.UnroutableMessageError`: not delivered, retried.
* Redis Streams: ``XADD`` to the stream named by ``destination`` returned an
  entry ID. A stream nobody reads keeps the message; watch its length.
* NATS JetStream: the stream named by ``stream=`` acknowledged the publish to
  the subject ``destination`` (a ``PubAck``). A core NATS publish confirms
  nothing, so ``stream=`` is required on NATS.
"""

from __future__ import annotations

from typing import Any

from inboxguard.adapters._loop_transport import LoopTransport
from inboxguard.errors import ConfigurationError, UnroutableMessageError
from inboxguard.outbox import OutboxMessage

__all__ = ["FastStreamTransport"]

#: Seconds a publish may take before the row counts as not delivered.
DEFAULT_TIMEOUT = 30.0


class FastStreamTransport(LoopTransport):
    """``transport(message)`` publishing through a FastStream broker.

    Args:
        broker: a ``RabbitBroker``, ``RedisBroker`` or ``NatsBroker``, owned
            by this transport (connected on its own event loop thread; do not
            use it from another loop).
        stream: NATS only, required there: the JetStream stream that must
            acknowledge each publish.
        timeout: seconds to wait for one publish.

    Raises:
        ConfigurationError: a broker of another kind, or NATS without ``stream``.
    """

    thread_name = "inboxguard-faststream-transport"

    def __init__(
        self, broker: Any, *, stream: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        self.kind = _kind(broker)
        if self.kind == "nats" and not stream:
            msg = (
                "FastStreamTransport on NATS needs stream= (the JetStream stream that"
                " acknowledges each publish); a core NATS publish confirms nothing"
            )
            raise ConfigurationError(msg)
        if self.kind != "nats" and stream is not None:
            msg = f"stream= applies to NATS JetStream only, not to a {type(broker).__name__}"
            raise ConfigurationError(msg)
        super().__init__(timeout)
        self.broker = broker
        self.stream = stream

    async def _open(self) -> None:
        """Connect the broker."""
        await self.broker.connect()

    async def _shut(self) -> None:
        """Stop the broker."""
        await self.broker.stop()

    async def _publish(self, message: OutboxMessage) -> dict[str, Any]:
        """Publish; return a receipt once the broker has the message.

        Raises:
            UnroutableMessageError: RabbitMQ returned the message.
            Exception: whatever the broker client raised (not delivered).
        """
        headers = dict(message.headers)
        receipt: dict[str, Any] = {"command_id": message.command_id}
        if self.kind == "rabbit":
            result = await self.broker.publish(
                message.payload,
                queue=message.destination,
                headers=headers,
                message_id=message.command_id,
                correlation_id=message.command_id,
                persist=True,
                mandatory=True,
            )
            _require_routed(result, message.destination)
            return {**receipt, "queue": message.destination}
        if self.kind == "redis":
            entry = await self.broker.publish(
                message.payload,
                stream=message.destination,
                headers=headers,
                correlation_id=message.command_id,
            )
            entry_id = entry.decode() if isinstance(entry, bytes) else str(entry)
            return {**receipt, "stream": message.destination, "entry_id": entry_id}
        ack = await self.broker.publish(
            message.payload,
            subject=message.destination,
            headers={k: str(v) for k, v in headers.items()},
            correlation_id=message.command_id,
            stream=self.stream,
        )
        return {**receipt, "stream": ack.stream, "seq": ack.seq}


def _kind(broker: Any) -> str:
    module = type(broker).__module__
    for kind in ("rabbit", "redis", "nats"):
        if module.startswith(f"faststream.{kind}."):
            return kind
    msg = (
        "FastStreamTransport publishes through a FastStream RabbitBroker, RedisBroker or"
        f" NatsBroker, got {type(broker).__name__}"
    )
    raise ConfigurationError(msg)


def _require_routed(result: Any, destination: str) -> None:
    """Raise when RabbitMQ returned the publish (``Basic.Return``) or refused it."""
    frame = getattr(result, "delivery", None)
    name = type(frame).__name__
    if name == "Return":
        text = getattr(frame, "reply_text", "returned")
        msg = (
            f"RabbitMQ returned the message ({text}): no queue is bound to routing key"
            f" {destination!r} on the default exchange; declare the queue or fix the"
            " row's destination"
        )
        raise UnroutableMessageError(msg, destination=destination)
    if name == "Nack":
        msg = f"RabbitMQ refused the message for {destination!r} (publisher confirm Nack)"
        raise UnroutableMessageError(msg, destination=destination)
