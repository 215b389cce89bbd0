"""Fixtures of the FastStream suite: one broker (RabbitMQ, Redis Streams or NATS
JetStream) per run of each test, PostgreSQL, and a queue, stream and table
prefix of the test's own."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

import inboxguard
from integrations.faststream.brokers import GROUP, kind
from integrations.faststream.producer import publish
from integrations.payments import Config, make_inbox
from tests.adapters.generic_support import Deliveries, reference_settings, running
from tests.conftest import AMQP_URL, REDIS_URL, require_service

NATS_URL = "nats://127.0.0.1:4222"
BROKERS = {"rabbitmq": AMQP_URL, "redis": REDIS_URL, "nats": NATS_URL}


@dataclass
class FastStreamSetup:
    """Everything a test needs to run the reference worker and look at the outcome."""

    broker: str
    config: Config
    engine: Engine
    inbox: inboxguard.Inbox
    deliveries: Deliveries
    tmp: Path
    env: dict[str, str]

    def worker(self, **env: str) -> Any:
        return running(
            "integrations.faststream.worker", {**self.env, **env}, self.tmp / "worker.log"
        )

    def send(
        self, *bodies: Any, headers: dict[str, Any] | None = None, in_order: bool = True
    ) -> None:
        """Publish ``bodies``; in the order given unless ``in_order=False``."""
        asyncio.run(publish(self.config, bodies, headers, in_order=in_order))

    def waiting(self) -> int:
        """Messages the broker still holds for the worker: queued (RabbitMQ),
        pending or unread in the group (Redis), unacknowledged or undelivered
        (JetStream)."""
        return asyncio.run(_waiting(self.config))


async def _waiting(config: Config) -> int:
    which = kind(config.broker_url)
    if which == "rabbit":
        import aio_pika

        connection = await aio_pika.connect(config.broker_url)
        async with connection:
            channel = await connection.channel()
            queue = await channel.declare_queue(config.queue, passive=True)
            return int(queue.declaration_result.message_count or 0)
    if which == "redis":
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(config.broker_url)
        try:
            [group] = [
                g for g in await client.xinfo_groups(config.queue) if g["name"] == GROUP.encode()
            ]
            return int(group["pending"]) + int(group.get("lag") or 0)
        finally:
            await client.aclose()
    import nats

    nc = await nats.connect(config.broker_url)
    try:
        info = await nc.jetstream().consumer_info(config.queue, GROUP)
        return int(info.num_ack_pending) + int(info.num_pending)
    finally:
        await nc.close()


async def _drop(config: Config) -> None:
    which = kind(config.broker_url)
    if which == "rabbit":
        import aio_pika

        connection = await aio_pika.connect(config.broker_url)
        async with connection:
            channel = await connection.channel()
            await channel.queue_delete(config.queue)
    elif which == "redis":
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(config.broker_url)
        await client.delete(config.queue)
        await client.aclose()
    else:
        import nats
        from nats.js.errors import NotFoundError

        nc = await nats.connect(config.broker_url)
        try:
            await nc.jetstream().delete_stream(config.queue)
        except NotFoundError:
            pass
        finally:
            await nc.close()


def _setup(name: str, pg_url: str, prefix: str, tmp_path: Path) -> Iterator[FastStreamSetup]:
    require_service(name)
    config, env = reference_settings(pg_url, BROKERS[name], prefix, tmp_path)
    engine = create_engine(pg_url)
    inbox = make_inbox(engine, config)
    setup = FastStreamSetup(
        name, config, engine, inbox, Deliveries(tmp_path / "deliveries.log"), tmp_path, env
    )
    try:
        yield setup
    finally:
        asyncio.run(_drop(config))
        inbox.drop_schema()
        engine.dispose()


@pytest.fixture(params=list(BROKERS))
def fs_setup(
    request: pytest.FixtureRequest, pg_url: str, prefix: str, tmp_path: Path
) -> Iterator[FastStreamSetup]:
    """The reference app on each broker in turn."""
    yield from _setup(request.param, pg_url, prefix, tmp_path)


__all__ = ["BROKERS", "FastStreamSetup"]
