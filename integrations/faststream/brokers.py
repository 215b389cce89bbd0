"""One FastStream broker, subscriber and declaration per broker kind.

The worker and the producer agree here on where the payments go: a durable
RabbitMQ queue, a Redis stream with consumer group ``payments`` (plus a
claiming subscriber that takes over what a killed worker left pending), a
JetStream stream with a durable pull consumer, or a Kafka topic read by
consumer group ``payments`` with ``AckPolicy.MANUAL`` (offsets committed by
the guard, after the transaction).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from integrations.payments import Config

#: The consumer group (Redis) and durable consumer (JetStream) of the worker.
GROUP = "payments"


def kind(url: str) -> str:
    """``rabbit``, ``redis``, ``nats`` or ``kafka``, from the broker URL's scheme."""
    scheme = url.split("://", 1)[0]
    if scheme.startswith("amqp"):
        return "rabbit"
    if scheme in ("redis", "nats", "kafka"):
        return scheme
    msg = (
        f"INBOXGUARD_BROKER_URL must start with amqp://, redis://, nats:// or kafka://, got {url!r}"
    )
    raise SystemExit(msg)


def dead_letter_topic(config: Config) -> str | None:
    """The dead-letter topic on Kafka (the plain Kafka worker's); None on the
    other brokers, where the quarantine record is the dead letter."""
    if kind(config.broker_url) != "kafka":
        return None
    from integrations.kafka import topics

    return topics.dead_letter_topic(config)


def make_broker(config: Config, middlewares: Sequence[Any] = ()) -> Any:
    """A FastStream broker on ``config.broker_url``; its own logs only at DEBUG."""
    options: dict[str, Any] = {"middlewares": middlewares, "log_level": logging.DEBUG}
    which = kind(config.broker_url)
    if which == "rabbit":
        from faststream.rabbit import RabbitBroker

        return RabbitBroker(config.broker_url, **options)
    if which == "redis":
        from faststream.redis import RedisBroker

        return RedisBroker(config.broker_url, **options)
    if which == "kafka":
        from faststream.kafka import KafkaBroker

        from integrations.kafka.topics import bootstrap

        return KafkaBroker(bootstrap(config), **options)
    from faststream.nats import NatsBroker

    return NatsBroker(config.broker_url, **options)


def subscribe(broker: Any, config: Config, handler: Callable[..., Any]) -> Any:
    """Register ``handler`` on the broker's payments source; return it."""
    which = kind(config.broker_url)
    if which == "rabbit":
        from faststream.rabbit import Channel, RabbitQueue

        # FastStream runs a RabbitMQ subscriber's deliveries concurrently, up
        # to the channel's prefetch (unbounded without one).
        return broker.subscriber(
            RabbitQueue(config.queue, durable=True), channel=Channel(prefetch_count=10)
        )(handler)
    if which == "redis":
        from faststream.redis import StreamSub

        me = f"worker-{os.getpid()}"
        idle = config.visibility_timeout * 1000
        # At most 10 entries read ahead: an entry waiting in the worker's hands
        # longer than the claim idle time would be claimed (a duplicate delivery).
        reader = StreamSub(config.queue, group=GROUP, consumer=me, max_records=10)
        claimer = StreamSub(config.queue, group=GROUP, consumer=f"{me}-c", min_idle_time=idle)
        return broker.subscriber(stream=claimer)(broker.subscriber(stream=reader)(handler))
    if which == "kafka":
        from faststream import AckPolicy

        from integrations.kafka.topics import group_timeouts

        # MANUAL: the guard commits each offset after its transaction. The
        # group's timeouts are the Kafka worker's (INBOXGUARD_KAFKA_SESSION_TIMEOUT_MS,
        # INBOXGUARD_KAFKA_HEARTBEAT_MS; see docs/adapters/kafka.md).
        return broker.subscriber(
            config.queue,
            group_id=GROUP,
            ack_policy=AckPolicy.MANUAL,
            auto_offset_reset="earliest",
            **group_timeouts(),
        )(handler)
    from faststream.nats import JStream, PullSub
    from nats.js.api import ConsumerConfig

    return broker.subscriber(
        config.queue,
        stream=JStream(config.queue, subjects=[config.queue]),
        durable=GROUP,
        pull_sub=PullSub(batch_size=10, timeout=0.2),
        config=ConsumerConfig(ack_wait=config.visibility_timeout),
    )(handler)


async def declare(config: Config) -> None:
    """Create the queue, stream and group before anything is published, so a
    message sent before the first worker starts is kept for it."""
    which = kind(config.broker_url)
    if which == "kafka":
        from integrations.kafka import topics

        await topics.declare(config)
    elif which == "rabbit":
        import aio_pika

        connection = await aio_pika.connect(config.broker_url)
        async with connection:
            channel = await connection.channel()
            await channel.declare_queue(config.queue, durable=True)
    elif which == "redis":
        import redis.asyncio as aioredis
        from redis.exceptions import ResponseError

        client = aioredis.Redis.from_url(config.broker_url)
        try:
            await client.xgroup_create(config.queue, GROUP, id="0", mkstream=True)
        except ResponseError as error:
            if "BUSYGROUP" not in str(error):
                raise
        finally:
            await client.aclose()
    else:
        import nats

        nc = await nats.connect(config.broker_url)
        try:
            await nc.jetstream().add_stream(name=config.queue, subjects=[config.queue])
        finally:
            await nc.close()


def publish_options(config: Config) -> dict[str, Any]:
    """Where ``broker.publish`` sends a payment on this broker."""
    which = kind(config.broker_url)
    if which == "rabbit":
        return {"queue": config.queue, "persist": True}
    if which == "redis":
        return {"stream": config.queue}
    if which == "kafka":
        return {"topic": config.queue}
    # JetStream acks each publish; its client's default wait (0.5 s) is shorter
    # than a loaded server may take, and an unacked publish raises.
    return {"subject": config.queue, "stream": config.queue, "timeout": 10.0}
