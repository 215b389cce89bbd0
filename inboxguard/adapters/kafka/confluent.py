"""confluent-kafka (librdkafka) under :class:`~inboxguard.adapters.kafka.GuardedConsumer`.

:class:`ConfluentConsumer` gives a ``confluent_kafka.Consumer`` the few
calls the guarded consumer makes (subscribe, start, poll a batch, commit
given offsets, seek, stop), so the same code decides everything: where the
command ID comes from, one transaction per record or per polled batch
(``guard_batch``), retries in place, dead letters, partition watermarks,
and an offset committed only after its evidence. :class:`ConfluentProducer`
produces dead letters, each waiting for the broker's acknowledgement.

Usage::

    consumer = ConfluentConsumer({
        "bootstrap.servers": "kafka:9092",
        "group.id": "billing",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    guarded = GuardedConsumer(consumer, inbox, name="billing.charge", topics=["charges"], ...)

librdkafka's blocking calls run on a worker thread, one at a time, in the
order the guarded consumer makes them. Its rebalance callbacks run inside
the poll; they are handed to the guarded consumer's listener in the event
loop before the poll's records. Commits are synchronous
(``asynchronous=False``). A handler receives a :class:`ConfluentRecord`
(``record.message`` is librdkafka's own message).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

__all__ = ["ConfluentConsumer", "ConfluentProducer", "ConfluentRecord"]

logger = logging.getLogger("inboxguard.kafka")

#: librdkafka's ``auto.offset.reset`` names that read from the oldest record.
_EARLIEST = {"smallest", "earliest", "beginning"}
#: librdkafka's timestamp types, as aiokafka numbers them (0 CreateTime, 1 LogAppendTime).
_TIMESTAMP_TYPES = {1: 0, 2: 1}
#: Seconds a dead letter may take to be acknowledged before it is retried.
PRODUCE_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class ConfluentRecord:
    """One consumed record, with the attributes of aiokafka's ``ConsumerRecord``."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes]]
    timestamp: int | None
    timestamp_type: int | None
    message: Any

    @classmethod
    def of(cls, message: Any) -> ConfluentRecord:
        """The record of a ``confluent_kafka.Message``."""
        kind, stamp = message.timestamp()
        return cls(
            topic=message.topic(),
            partition=message.partition(),
            offset=message.offset(),
            key=message.key(),
            value=message.value(),
            headers=list(message.headers() or ()),
            timestamp=stamp if kind in _TIMESTAMP_TYPES else None,
            timestamp_type=_TIMESTAMP_TYPES.get(kind),
            message=message,
        )


class ConfluentConsumer:
    """A ``confluent_kafka.Consumer`` (created by :meth:`start` from ``config``)
    as :class:`~inboxguard.adapters.kafka.GuardedConsumer` drives it.

    ``config`` is librdkafka's: ``group.id`` is required and
    ``enable.auto.commit`` must be ``False`` (librdkafka's default is
    ``True``); the guarded consumer's start-up refuses either, naming it.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)
        # Read by the start-up checks and the guarantee table, as on aiokafka.
        self._enable_auto_commit = _flag(self.config.get("enable.auto.commit", True))
        self._group_id = self.config.get("group.id")
        reset = str(self.config.get("auto.offset.reset", "latest"))
        self._auto_offset_reset = "earliest" if reset in _EARLIEST else reset
        self._bootstrap_servers = str(self.config.get("bootstrap.servers", "localhost"))
        self._topics: list[str] = []
        self._listener: Any = None
        self._events: list[tuple[str, list[TopicPartition]]] = []
        self._consumer: Any = None

    def subscribe(self, topics: Sequence[str], listener: Any = None) -> None:
        """Subscribe to ``topics`` when started (``listener``: aiokafka's rebalance listener)."""
        self._topics = list(topics)
        self._listener = listener

    async def start(self) -> None:
        """Create the librdkafka consumer and subscribe it."""
        from confluent_kafka import Consumer  # noqa: PLC0415 - the extra's client

        self._consumer = Consumer(self.config)
        self._consumer.subscribe(
            self._topics,
            on_assign=lambda _c, parts: self._events.append(("assigned", _tps(parts))),
            on_revoke=lambda _c, parts: self._events.append(("revoked", _tps(parts))),
            on_lost=lambda _c, parts: self._events.append(("revoked", _tps(parts))),
        )

    async def getmany(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConfluentRecord]]:
        """One poll: up to ``max_records`` records by partition, in order."""
        messages = await asyncio.to_thread(
            self._consumer.consume, max_records or 500, timeout_ms / 1000
        )
        await self._rebalanced()
        polled: dict[TopicPartition, list[ConfluentRecord]] = {}
        for message in messages:
            error = message.error()
            if error is not None:
                if error.fatal():
                    raise KafkaError(str(error))
                logger.warning("kafka consumer: %s", error)
                continue
            record = ConfluentRecord.of(message)
            polled.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
        return polled

    async def _rebalanced(self) -> None:
        events, self._events = self._events, []
        if self._listener is None:
            return
        for what, parts in events:
            if what == "assigned":
                await self._listener.on_partitions_assigned(parts)
            else:
                await self._listener.on_partitions_revoked(parts)

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` (the next offset to read, per partition) and wait for it.

        Raises:
            KafkaError: the group refused the commit (a rebalance took the partition).
        """
        from confluent_kafka import KafkaException  # noqa: PLC0415
        from confluent_kafka import TopicPartition as Part  # noqa: PLC0415

        parts = [Part(tp.topic, tp.partition, offset) for tp, offset in offsets.items()]
        try:
            await asyncio.to_thread(self._consumer.commit, offsets=parts, asynchronous=False)
        except KafkaException as error:
            raise KafkaError(str(error)) from error

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Read ``partition`` from ``offset`` on."""
        from confluent_kafka import TopicPartition as Part  # noqa: PLC0415

        self._consumer.seek(Part(partition.topic, partition.partition, offset))

    async def stop(self) -> None:
        """Leave the group and close the consumer."""
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            await asyncio.to_thread(consumer.close)


class ConfluentProducer:
    """A ``confluent_kafka.Producer`` producing dead letters, each one awaited
    until the broker acknowledged it (``acks=all`` unless ``config`` says otherwise)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        from confluent_kafka import Producer  # noqa: PLC0415

        self.producer = Producer({"acks": "all", **config})

    async def send_and_wait(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes]] = (),
    ) -> None:
        """Produce one record and wait for the broker.

        Raises:
            KafkaError: the broker did not acknowledge it.
        """
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()

        def delivered(error: Any, _message: Any) -> None:
            loop.call_soon_threadsafe(_settle, done, error)

        self.producer.produce(
            topic, value=value, key=key, headers=list(headers), on_delivery=delivered
        )
        left = await asyncio.to_thread(self.producer.flush, PRODUCE_TIMEOUT)
        if left and not done.done():
            raise KafkaError(f"no acknowledgement for a record to {topic!r} in {PRODUCE_TIMEOUT}s")
        error = await done
        if error is not None:
            raise KafkaError(str(error))

    async def stop(self) -> None:
        """Wait for what is still in flight, then close the producer."""
        await asyncio.to_thread(self.producer.flush, PRODUCE_TIMEOUT)
        close = getattr(self.producer, "close", None)  # confluent-kafka 2.13 and later
        if close is not None:
            close()


def _settle(done: asyncio.Future[Any], error: Any) -> None:
    if not done.done():
        done.set_result(error)


def _tps(parts: Sequence[Any]) -> list[TopicPartition]:
    return [TopicPartition(p.topic, p.partition) for p in parts]


def _flag(value: Any) -> bool:
    return str(value).lower() in ("true", "1") if isinstance(value, str) else bool(value)
