"""Fixtures of the aio-pika end-to-end suite: RabbitMQ, PostgreSQL (asyncpg in the
consumer), and a queue and table prefix of the test's own."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kombu import Connection, Queue
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

import inboxguard
from integrations.asyncio.producer import publish
from integrations.payments import Config, make_inbox
from tests.adapters.generic_support import Deliveries, Worker, reference_settings, running
from tests.conftest import AMQP_URL, require_service

BROKERS = {"rabbitmq": AMQP_URL}


@dataclass
class AsyncioSetup:
    """Everything a test needs to run the reference consumer and look at the outcome."""

    config: Config
    engine: Engine
    inbox: inboxguard.Inbox
    deliveries: Deliveries
    tmp: Path
    env: dict[str, str]

    def worker(self, **env: str) -> Any:
        return running(
            "integrations.asyncio.consumer", {**self.env, **env}, self.tmp / "worker.log"
        )

    def send(self, *bodies: dict[str, Any], **properties: Any) -> None:
        asyncio.run(publish(self.config, bodies, **properties))

    def queue_depth(self) -> int:
        with Connection(self.config.broker_url) as conn:
            _, count, _ = Queue(self.config.queue, durable=True)(
                conn.default_channel
            ).queue_declare(passive=True)
            return int(count)


@pytest.fixture(params=list(BROKERS))
def asyncio_setup(
    request: pytest.FixtureRequest, pg_url: str, prefix: str, tmp_path: Path
) -> Iterator[AsyncioSetup]:
    require_service(request.param)
    config, env = reference_settings(pg_url, BROKERS[request.param], prefix, tmp_path)
    engine = create_engine(pg_url)
    inbox = make_inbox(engine, config)
    setup = AsyncioSetup(
        config, engine, inbox, Deliveries(tmp_path / "deliveries.log"), tmp_path, env
    )
    try:
        yield setup
    finally:
        with Connection(config.broker_url) as conn:
            Queue(config.queue, durable=True)(conn.default_channel).delete()
        inbox.drop_schema()
        engine.dispose()


__all__ = ["AsyncioSetup", "Worker"]
