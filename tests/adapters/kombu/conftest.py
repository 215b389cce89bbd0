"""Fixtures of the kombu end-to-end suite: one broker (RabbitMQ or Redis) per
run of each test, PostgreSQL, and a queue and table prefix of the test's own."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from kombu import Connection, Queue
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

import inboxguard
from integrations.kombu.producer import publish
from integrations.payments import Config, make_inbox
from tests.adapters.generic_support import Deliveries, Worker, reference_settings, running
from tests.conftest import AMQP_URL, REDIS_URL, require_service

BROKERS = {"rabbitmq": AMQP_URL, "redis": REDIS_URL}


@dataclass
class KombuSetup:
    """Everything a test needs to run the reference worker and look at the outcome."""

    config: Config
    engine: Engine
    inbox: inboxguard.Inbox
    deliveries: Deliveries
    tmp: Path
    env: dict[str, str]

    def worker(self, **env: str) -> Any:
        return running("integrations.kombu.worker", {**self.env, **env}, self.tmp / "worker.log")

    def send(self, *bodies: dict[str, Any], **properties: Any) -> None:
        publish(self.config, bodies, **properties)

    def queue_depth(self) -> int:
        options = self.config.transport_options()
        with Connection(self.config.broker_url, transport_options=options) as conn:
            if self.config.broker_url.startswith("redis"):
                return int(conn.default_channel.client.llen(self.config.queue))
            _, count, _ = Queue(self.config.queue, durable=True)(
                conn.default_channel
            ).queue_declare(passive=True)
            return int(count)

    def unacked(self) -> int | None:
        """Deliveries kombu's Redis transport holds for restore (None on RabbitMQ)."""
        if not self.config.broker_url.startswith("redis"):
            return None
        options = self.config.transport_options()
        with Connection(self.config.broker_url, transport_options=options) as conn:
            return int(conn.default_channel.client.hlen("unacked"))


@pytest.fixture(params=list(BROKERS))
def kombu_setup(
    request: pytest.FixtureRequest, pg_url: str, prefix: str, tmp_path: Path
) -> Iterator[KombuSetup]:
    require_service(request.param)
    config, env = reference_settings(pg_url, BROKERS[request.param], prefix, tmp_path)
    engine = create_engine(pg_url)
    inbox = make_inbox(engine, config)
    setup = KombuSetup(
        config, engine, inbox, Deliveries(tmp_path / "deliveries.log"), tmp_path, env
    )
    try:
        yield setup
    finally:
        with Connection(config.broker_url, transport_options=config.transport_options()) as conn:
            Queue(config.queue, durable=True)(conn.default_channel).delete()
        if config.broker_url.startswith("redis"):
            client = redis.Redis.from_url(config.broker_url)
            keys = list(client.scan_iter(match=f"{config.prefix}*"))
            if keys:
                client.delete(*keys)
        inbox.drop_schema()
        engine.dispose()


__all__ = ["KombuSetup", "Worker"]
