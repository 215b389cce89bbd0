"""Helpers of the Kafka suite: the reference worker's settings on a tansu broker,
and reading what a topic holds."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer
from sqlalchemy.engine import Engine

import inboxguard
from integrations.kafka.producer import publish
from integrations.payments import Config
from tests.adapters.generic_support import Deliveries, Worker, running
from tests.adapters.kafka.tansu import CONSUMER
from tests.conftest import unique


@dataclass
class KafkaSetup:
    """The reference worker's settings and what a test looks at."""

    config: Config
    engine: Engine
    inbox: inboxguard.Inbox
    deliveries: Deliveries
    tmp: Path
    env: dict[str, str]

    def worker(self, log: str = "worker.log", **env: str) -> Any:
        return running("integrations.kafka.worker", {**self.env, **env}, self.tmp / log)

    def faststream(self, log: str = "faststream.log", **env: str) -> Any:
        """The FastStream reference worker on this broker's Kafka topic."""
        return running("integrations.faststream.worker", {**self.env, **env}, self.tmp / log)

    def started(self, log: str = "worker.log", **env: str) -> Worker:
        """A worker started and left to the caller to stop."""
        worker = Worker("integrations.kafka.worker", {**self.env, **env}, self.tmp / log)
        worker.start()
        return worker

    def send(self, *bodies: Any, headers: dict[str, str] | None = None) -> None:
        asyncio.run(publish(self.config, bodies, headers))

    def topic(self, name: str, expected: int, timeout: float = 30) -> list[Any]:
        """The decoded values of ``name``, read from the start by a group of
        its own until ``expected`` arrived (or the deadline)."""
        return asyncio.run(read_topic(self.config.broker_url, name, expected, timeout))


async def read_topic(url: str, topic: str, expected: int, timeout: float) -> list[Any]:
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=url.removeprefix("kafka://"),
        group_id=unique("reader"),
        enable_auto_commit=False,
        **CONSUMER,
    )
    await consumer.start()
    found: list[Any] = []
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(found) < expected and loop.time() < deadline:
            polled = await consumer.getmany(timeout_ms=500)
            found.extend(json.loads(r.value) for rs in polled.values() for r in rs)
    finally:
        await consumer.stop()
    return found
