"""FastStream's Kafka broker under :class:`InboxMiddleware`.

A Kafka subscriber commits offsets, it does not acknowledge messages: with
``AckPolicy.MANUAL`` FastStream turns auto-commit off and ``msg.ack()``
commits the consumer's position, ``msg.nack()`` seeks back to the message so
it is read again. The guard settles each message like this:

* committed or a duplicate: ``ack()`` (the offset commit) after the
  transaction commits;
* refused (a mismatch, a stale message, retries exhausted): produced to the
  middleware's ``dead_letter_topic`` when one is named (key, value and
  headers kept), then ``ack()``; without one the quarantine record is the
  dead letter. A dead-letter produce that fails seeks back (``nack()``):
  the offset is never committed past a refused message nobody holds;
* retried: a copy with the next ``x-inbox-attempt`` is produced to the same
  topic and partition with the same key, then the original is committed
  (as on RabbitMQ and Redis Streams). A copy that cannot be produced seeks
  back instead.

Start-up: a guarded Kafka subscriber must declare ``AckPolicy.MANUAL`` (the
default, ``ACK_FIRST``, auto-commits offsets on a timer, before the
transaction), and a subscriber resetting to ``earliest`` adds its topics'
retention as replay windows (read from the broker).

Imports no Kafka client at module level.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from inboxguard._core.retention import Window
from inboxguard.adapters._kafka_startup import reset_windows, topic_retentions_blocking
from inboxguard.adapters.faststream._brokers import BrokerKind, Copy
from inboxguard.errors import ConfigurationError

__all__ = [
    "KafkaKind",
    "check_kafka_policy",
    "is_kafka",
    "kafka_kind",
    "kafka_windows",
]


def is_kafka(obj: Any) -> bool:
    """True for a FastStream Kafka message, subscriber or broker."""
    return type(obj).__module__.startswith("faststream.kafka.")


class KafkaKind(BrokerKind):
    """How a Kafka message is settled (see the module docstring)."""

    name = "kafka"

    def __init__(self, broker: Any = None, dead_letter_topic: str | None = None) -> None:
        self.broker = broker
        self.dead_letter_topic = dead_letter_topic

    def bind(self, broker: Any, dead_letter_topic: str | None) -> KafkaKind:
        """This kind for one delivery through ``broker``."""
        return KafkaKind(broker, dead_letter_topic)

    async def reject(self, msg: Any) -> None:
        if self.dead_letter_topic is not None:
            try:
                await self.dead_letter(msg)
            except Exception:
                await msg.nack()
                raise
        await msg.ack()

    async def dead_letter(self, msg: Any) -> None:
        """Produce the message, as it arrived, to the dead-letter topic."""
        await self.dead_letter_record(msg.raw_message)

    async def dead_letter_record(self, record: Any) -> None:
        """Produce one record (key, value, headers) to the dead-letter topic."""
        if self.dead_letter_topic is None:
            return
        headers = {
            k: v.decode(errors="replace") if isinstance(v, bytes) else str(v)
            for k, v in record.headers or ()
        }
        headers["x-inbox-source"] = f"{record.topic}/{record.partition}@{record.offset}"
        await self.broker.publish(
            record.value or b"", topic=self.dead_letter_topic, key=record.key, headers=headers
        )

    async def publish_copy(self, msg: Any, copy: Copy) -> None:
        raw = msg.raw_message
        await copy.broker.publish(
            copy.body,
            topic=raw.topic,
            key=raw.key,
            partition=raw.partition,
            headers={k: str(v) for k, v in copy.headers.items()},
            correlation_id=msg.correlation_id,
        )


def kafka_kind(msg: Any) -> KafkaKind:
    """The kind of a Kafka message the guard can hold until its commit.

    Raises:
        ConfigurationError: a message of a subscriber that auto-commits.
    """
    if type(msg).__name__ != "KafkaAckableMessage":
        text = (
            "InboxMiddleware cannot guard a Kafka subscriber that commits offsets on its"
            " own (AckPolicy.ACK_FIRST, the Kafka default: auto-commit); declare"
            " @broker.subscriber(..., ack_policy=AckPolicy.MANUAL)"
        )
        raise ConfigurationError(text)
    return KafkaKind()


def check_kafka_policy(sub: Any, where: str) -> None:
    """Refuse a Kafka subscriber that does not leave its commits to the guard.

    Raises:
        ConfigurationError: any ``ack_policy`` but ``AckPolicy.MANUAL``.
    """
    policy = getattr(sub, "ack_policy", None)
    if str(getattr(policy, "value", policy)) != "manual":
        msg = (
            f"InboxMiddleware cannot guard {where}: a Kafka subscriber must declare"
            " ack_policy=AckPolicy.MANUAL, so that its offsets are committed only by the"
            " middleware, after the transaction commits (the Kafka default, ACK_FIRST,"
            f" auto-commits them on a timer); got {policy!r}"
        )
        raise ConfigurationError(msg)


def kafka_windows(broker: Any, subscribers: Iterable[Any]) -> list[Window]:
    """The topic retention of each guarded Kafka subscriber resetting to
    ``earliest``, read from ``broker``'s cluster."""
    resets: dict[str, set[str]] = {}
    for sub in subscribers:
        if not is_kafka(sub):
            continue
        args: Mapping[str, Any] = getattr(sub, "_connection_args", None) or {}
        reset = str(args.get("auto_offset_reset", "latest"))
        resets.setdefault(reset, set()).update(getattr(sub, "topic_names", ()) or ())
    topics = resets.get("earliest", set())
    if not topics:
        return []
    servers = (getattr(broker, "_connection_kwargs", None) or {}).get("bootstrap_servers")
    retentions = topic_retentions_blocking(servers or "localhost", sorted(topics))
    return reset_windows("faststream: Kafka subscriber", "earliest", retentions)
