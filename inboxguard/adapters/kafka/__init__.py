"""Kafka consumers on aiokafka: each record, or each polled batch, applied once
by business command ID, with offsets committed only after the evidence.

Usage::

    consumer = AIOKafkaConsumer(
        bootstrap_servers="kafka:9092",
        group_id="billing",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    guarded = GuardedConsumer(
        consumer,
        inbox,
        name="billing.charge",
        topics=["charges"],
        session_factory=async_sessionmaker(engine),
        command_id="command_id",
    )
    await guarded.start()
    await guarded.run(charge)  # async def charge(body, record) -> result

The outbox relays to Kafka through
:class:`inboxguard.adapters.kafka.transport.KafkaTransport`. See
``docs/adapters/kafka.md`` for the outcomes and their guarantees.
"""

from __future__ import annotations

from inboxguard.adapters._delivery import (
    COMMAND_ID_HEADER,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_RETRY_DELAY,
    SENT_AT_HEADER,
)
from inboxguard.adapters._kafka_startup import DEFAULT_TOPIC_RETENTION
from inboxguard.adapters.kafka._consumer import BatchHandler, GuardedConsumer, Handler

__all__ = [
    "COMMAND_ID_HEADER",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_RETRY_DELAY",
    "DEFAULT_TOPIC_RETENTION",
    "SENT_AT_HEADER",
    "BatchHandler",
    "GuardedConsumer",
    "Handler",
]
