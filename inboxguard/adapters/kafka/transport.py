"""Outbox transport for Kafka: an aiokafka producer, ``acks="all"``.

The dispatcher is synchronous; this transport owns an event loop on a
thread of its own, starts its ``AIOKafkaProducer`` there on first use and
waits for each send. A row counts as delivered only once the partition
leader answered after every in-sync replica wrote the record
(``acks="all"``; any other ``acks`` is refused): a send that times out or
fails raises, and the dispatcher retries the row. A retried row can land
twice in the topic (the first send reached the broker, its answer did not),
so every record carries the command ID in ``x-inbox-command-id``, the payload
digest in ``x-inbox-digest`` and the commit time in ``x-inbox-sent-at``: the
guarded consumer skips the second copy by its ID.

The row's ``destination`` is the topic. The record key is ``key(message)``
when given (the entity whose records must stay in order, e.g. the account
ID in the payload), else none.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer

from inboxguard.adapters._loop_transport import LoopTransport
from inboxguard.errors import ConfigurationError
from inboxguard.outbox import OutboxMessage

__all__ = ["KafkaTransport"]

#: Seconds a send may take before the row counts as not delivered.
DEFAULT_TIMEOUT = 30.0

KeyOf = Callable[[OutboxMessage], str | bytes | None]


class KafkaTransport(LoopTransport):
    """``transport(message)`` producing each outbox row to Kafka with ``acks="all"``.

    Args:
        bootstrap_servers: the Kafka brokers (``"host:port"`` or a list).
        key: the record key of a row, or None for records without a key.
        timeout: seconds to wait for one send.
        producer_options: more ``AIOKafkaProducer`` keyword arguments
            (security, compression...); ``acks`` other than ``"all"`` is refused.

    Raises:
        ConfigurationError: ``acks`` is not ``"all"``, or ``key`` is not callable.
    """

    thread_name = "inboxguard-kafka-transport"

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        key: KeyOf | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        producer_options: Mapping[str, Any] | None = None,
    ) -> None:
        options = dict(producer_options or {})
        acks = options.pop("acks", "all")
        if acks not in ("all", -1):
            msg = (
                f"KafkaTransport needs acks='all' (the row is marked delivered only once every"
                f" in-sync replica has the record), got acks={acks!r}"
            )
            raise ConfigurationError(msg)
        if key is not None and not callable(key):
            msg = f"key must be a callable over the OutboxMessage, got {key!r}"
            raise ConfigurationError(msg)
        super().__init__(timeout)
        self.bootstrap_servers = bootstrap_servers
        self.key = key
        self.options = options
        self._producer: AIOKafkaProducer | None = None

    async def _open(self) -> None:
        """Start the producer, ``acks="all"``."""
        producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap_servers, acks="all", **self.options
        )
        await producer.start()
        self._producer = producer

    async def _publish(self, message: OutboxMessage) -> dict[str, Any]:
        """Produce; return a receipt (topic, partition, offset) once acknowledged."""
        assert self._producer is not None  # opened before the first publish
        headers = [(k, _bytes(v)) for k, v in message.headers.items()]
        key = self.key(message) if self.key is not None else None
        meta = await self._producer.send_and_wait(
            message.destination,
            json.dumps(message.payload, separators=(",", ":")).encode(),
            key=_bytes(key) if key is not None else None,
            headers=headers,
        )
        return {
            "command_id": message.command_id,
            "topic": meta.topic,
            "partition": meta.partition,
            "offset": meta.offset,
        }

    async def _shut(self) -> None:
        """Stop the producer."""
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None


def _bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode()
