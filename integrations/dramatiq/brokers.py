"""Broker setup for Redis and RabbitMQ, chosen by the URL's scheme."""

from __future__ import annotations

from dramatiq import Broker


def make_broker(url: str, *, redis_heartbeat_ms: int = 60_000) -> Broker:
    """A broker with Dramatiq's default middleware (Retries included)."""
    if url.startswith(("redis://", "rediss://", "unix://")):
        from dramatiq.brokers.redis import MAINTENANCE_SCALE, RedisBroker

        # Maintenance on every call makes the heartbeat requeue of a killed
        # worker's messages prompt (the default is one call in a thousand).
        return RedisBroker(
            url=url,
            heartbeat_timeout=redis_heartbeat_ms,
            maintenance_chance=MAINTENANCE_SCALE if redis_heartbeat_ms < 60_000 else 1000,
        )
    if url.startswith(("amqp://", "amqps://")):
        from dramatiq.brokers.rabbitmq import RabbitmqBroker

        return RabbitmqBroker(url=url)
    msg = f"unsupported broker URL {url!r}: use redis://... or amqp://..."
    raise SystemExit(msg)
