"""What each FastStream broker does with an attempt's verdict (ack, reject, retry).

FastStream gives every message ``ack()``, ``nack()`` and ``reject()``, but
the brokers mean different things by them:

* RabbitMQ: ``reject(requeue=False)`` dead-letters (through the queue's
  ``x-dead-letter-exchange`` when it has one); ``nack(requeue=True)`` puts
  the message back at the head of the queue at once, with no delay and no
  count. A retry is therefore a copy published to the subscriber's queue
  with the next ``x-inbox-attempt`` and an ``x-inbox-retry-at`` time, then
  the original is acked (the kombu and aio-pika consumers do the same).
* Redis Streams: ``nack()`` and ``reject()`` only mark the message; it stays
  pending until a claiming subscriber takes it. A retry is a copy added to
  the stream, then the original is acknowledged (``XACK``); a refusal is
  acknowledged once its quarantine record holds it (Redis has no
  dead-letter queue: the quarantine is the dead letter).
* NATS JetStream: the server counts deliveries (``num_delivered``) and
  ``nack(delay=...)`` redelivers after a delay; ``reject()`` terminates the
  message (``TERM``), which is never redelivered.
* Kafka: see ``_kafka`` (offsets committed, a copy for a retry, a
  dead-letter topic).

Imports no broker at module level: each broker's FastStream package is
imported only when a message of it arrives.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inboxguard._core import headers as _headers
from inboxguard.adapters._delivery import parse_sent_at
from inboxguard.errors import ConfigurationError

__all__ = ["BrokerKind", "Copy", "kind_of", "record_time", "sent_time_of"]


@dataclass(frozen=True, slots=True)
class Copy:
    """The copy of a message published for its next attempt: the decoded
    body (re-encoded by FastStream), its headers, and the broker and
    subscriber it goes through."""

    body: Any
    headers: dict[str, Any]
    broker: Any
    subscriber: Any


class BrokerKind:
    """How one broker settles a message; subclasses per broker."""

    name = "broker"
    #: True when the broker redelivers with a delay of its own (no copy published).
    native_retry = False

    def attempt(self, msg: Any) -> int | None:
        """The broker's own delivery count, or None (the attempt header counts)."""
        return None

    async def ack(self, msg: Any) -> None:
        """Acknowledge: the broker forgets the message."""
        await msg.ack()

    async def reject(self, msg: Any) -> None:
        """Settle a refused message for good (its quarantine record holds it)."""
        await msg.reject()

    async def release(self, msg: Any) -> None:
        """Leave the message to the broker, unsettled, when its retry copy could
        not be published (the broker delivers it again)."""
        await msg.nack()

    async def retry(self, msg: Any, copy: Copy, delay: float) -> None:
        """Deliver the message again after ``delay`` seconds: publish ``copy``,
        then acknowledge the original (NATS: ``nack(delay=...)`` instead)."""
        await self.publish_copy(msg, copy)
        await msg.ack()

    async def publish_copy(self, msg: Any, copy: Copy) -> None:
        """Publish the copy of a retried message (RabbitMQ, Redis)."""
        raise NotImplementedError


class _Rabbit(BrokerKind):
    name = "rabbitmq"

    async def release(self, msg: Any) -> None:
        await msg.nack(requeue=True)

    async def reject(self, msg: Any) -> None:
        await msg.reject(requeue=False)

    async def publish_copy(self, msg: Any, copy: Copy) -> None:
        raw = msg.raw_message
        # The queue this subscriber consumes (prefixes applied), so that only
        # it receives the copy, whatever exchange brought the original.
        declared = getattr(copy.subscriber, "_queue_obj", None)
        queue = getattr(declared, "name", None) or raw.routing_key
        await copy.broker.publish(
            copy.body,
            queue=queue,
            headers=copy.headers,
            message_id=msg.message_id,
            correlation_id=msg.correlation_id,
            persist=True,
            timestamp=raw.timestamp,
        )


class _Redis(BrokerKind):
    name = "redis"

    async def release(self, msg: Any) -> None:
        """The entry stays pending; the claiming subscriber delivers it again."""

    async def reject(self, msg: Any) -> None:
        # A stream has no dead-letter queue and reject() leaves the entry
        # pending (a claiming subscriber would deliver it again); the
        # quarantine record holds it, so acknowledge it.
        await msg.ack()

    async def publish_copy(self, msg: Any, copy: Copy) -> None:
        await copy.broker.publish(
            copy.body,
            stream=msg.raw_message["channel"],
            # FastStream's Redis message format carries header values as text
            headers={k: str(v) for k, v in copy.headers.items()},
            correlation_id=msg.correlation_id,
        )


class _Nats(BrokerKind):
    name = "nats"
    native_retry = True

    def attempt(self, msg: Any) -> int | None:
        return int(msg.raw_message.metadata.num_delivered)

    async def retry(self, msg: Any, copy: Copy, delay: float) -> None:
        await msg.nack(delay=delay)


_KINDS: dict[str, BrokerKind] = {"rabbit": _Rabbit(), "redis": _Redis(), "nats": _Nats()}


def kind_of(msg: Any) -> BrokerKind:
    """The broker a FastStream message came from.

    Raises:
        ConfigurationError: a broker or a subscriber kind that cannot hold a
            message until its transaction commits (Redis lists and Pub/Sub,
            core NATS without JetStream). Kafka messages are settled by
            ``_kafka.KafkaKind``.
    """
    module = type(msg).__module__
    for key, kind in _KINDS.items():
        if module.startswith(f"faststream.{key}."):
            _require_acknowledgeable(key, msg)
            return kind
    msg_text = (
        f"InboxMiddleware cannot guard a {type(msg).__name__}: only RabbitMQ queues,"
        " Redis Streams with a consumer group and NATS JetStream hold a message until"
        " it is acknowledged"
    )
    raise ConfigurationError(msg_text)


def _require_acknowledgeable(key: str, msg: Any) -> None:
    if key == "redis" and type(msg).__name__ != "RedisStreamMessage":
        text = (
            f"InboxMiddleware cannot guard a {type(msg).__name__}: Redis lists and Pub/Sub"
            " never redeliver; subscribe to a stream with StreamSub(name, group=...,"
            " consumer=...)"
        )
        raise ConfigurationError(text)
    if key == "redis" and getattr(msg, "group", None) is None:
        text = (
            "InboxMiddleware cannot guard a Redis stream read without a consumer group"
            " (nothing is acknowledged, a killed worker loses its message); use"
            " StreamSub(name, group=..., consumer=...)"
        )
        raise ConfigurationError(text)
    if key == "nats" and getattr(msg.raw_message, "_ackd", None) is not None:
        try:
            _ = msg.raw_message.metadata
        except Exception as error:
            text = (
                "InboxMiddleware cannot guard a core NATS subscription (no acknowledgement,"
                " no redelivery); subscribe through JetStream (stream=JStream(...))"
            )
            raise ConfigurationError(text) from error


def sent_time_of(msg: Any, headers: Mapping[str, Any]) -> dt.datetime | None:
    """When the message was first sent: the ``x-inbox-sent-at`` header (either
    spelling), else the broker's own stamp where it has one (the AMQP
    ``timestamp`` property; a copy republished for a retry keeps it).

    Raises:
        InvalidCommandError: the value found is not a time.
    """
    raw = _headers.sent_at_of(headers)
    if raw is not None:
        return parse_sent_at(raw)
    if type(msg).__module__.startswith("faststream.rabbit."):
        return parse_sent_at(getattr(msg.raw_message, "timestamp", None))
    if type(msg).__module__.startswith("faststream.kafka."):
        return record_time(msg.raw_message)
    return None


def record_time(record: Any) -> dt.datetime | None:
    """A Kafka record's ``CreateTime`` (the producer's clock; a broker's
    ``LogAppendTime`` is renewed by a producer's retry), else None."""
    if getattr(record, "timestamp_type", None) != 0 or record.timestamp is None:
        return None
    return dt.datetime.fromtimestamp(record.timestamp / 1000, dt.UTC)
