"""Where the Kafka worker and producer meet: the topic, its dead-letter topic,
the consumer group, and their declaration."""

from __future__ import annotations

import contextlib
import os

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from integrations.payments import Config

#: The worker's consumer group.
GROUP = "payments"
#: Partitions of the payments topic (two, so two workers share it).
PARTITIONS = 2
#: How long the topics keep records: one hour, well inside the inbox's evidence.
RETENTION_MS = 3_600_000


def group_timeouts() -> dict[str, int]:
    """The consumer group's ``session_timeout_ms`` and ``heartbeat_interval_ms``:
    ``INBOXGUARD_KAFKA_SESSION_TIMEOUT_MS`` (6000, the least Apache Kafka's
    default ``group.min.session.timeout.ms`` accepts) and
    ``INBOXGUARD_KAFKA_HEARTBEAT_MS`` (1000). The tests set shorter ones, which
    tansu accepts: it holds a join for about half the session timeout and
    drops a killed member after it (see docs/adapters/kafka.md)."""
    return {
        "session_timeout_ms": int(os.environ.get("INBOXGUARD_KAFKA_SESSION_TIMEOUT_MS", "6000")),
        "heartbeat_interval_ms": int(os.environ.get("INBOXGUARD_KAFKA_HEARTBEAT_MS", "1000")),
    }


def bootstrap(config: Config) -> str:
    """The bootstrap address (``host:port``; a ``kafka://`` prefix is dropped)."""
    return config.broker_url.removeprefix("kafka://")


def dead_letter_topic(config: Config) -> str:
    """Where refused payments go."""
    return f"{config.queue}.dlq"


async def declare(config: Config) -> None:
    """Create the payments topic and its dead-letter topic if they are missing."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap(config))
    await admin.start()
    try:
        for name, partitions in ((config.queue, PARTITIONS), (dead_letter_topic(config), 1)):
            topic = NewTopic(
                name,
                num_partitions=partitions,
                replication_factor=1,
                topic_configs={"retention.ms": str(RETENTION_MS)},
            )
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics([topic])
    finally:
        await admin.close()
