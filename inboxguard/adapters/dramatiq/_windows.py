"""The replay windows a Dramatiq deployment opens, read from the broker.

Each window is a span during which the same message can come back: a
dead-lettered message can be requeued by hand until the dead-letter TTL
purges it, a retried message comes back for as long as the Retries schedule
runs, and the Redis broker requeues the unacknowledged messages of a worker
whose heartbeat is older than its timeout.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Iterable
from typing import Any

from dramatiq import Actor, Broker
from dramatiq.middleware import Retries
from dramatiq.middleware.retries import DEFAULT_MAX_BACKOFF

from inboxguard._core.retention import UNBOUNDED, Window
from inboxguard.errors import ConfigurationError

__all__ = ["replay_windows", "retries_of", "retry_span"]


def retries_of(broker: Broker) -> Retries:
    """The broker's Retries middleware.

    Raises:
        ConfigurationError: there is none. Without it a ``Retry`` (how the
            adapter says "busy, try later") is acknowledged and lost.
    """
    for middleware in broker.middleware:
        if isinstance(middleware, Retries):
            return middleware
    msg = (
        "the broker has no Retries middleware, so a message the inbox asks to retry"
        " (InProgressError, a lost connection) would be acknowledged and lost; keep"
        " dramatiq.middleware.Retries in the broker's middleware (set max_retries=0 on"
        " actors that must not retry)"
    )
    raise ConfigurationError(msg)


def retry_span(max_retries: int | None, min_backoff: int, max_backoff: int) -> dt.timedelta:
    """The longest time the Retries schedule can keep a message coming back.

    Each retry waits at most twice its exponential backoff (Dramatiq's jitter)
    and never more than ``max_backoff`` milliseconds.
    """
    if max_retries is None:
        return UNBOUNDED
    cap = min(max_backoff, DEFAULT_MAX_BACKOFF)
    total_ms = sum(min(2 * min_backoff * 2 ** min(i, 32), cap) for i in range(max_retries))
    return dt.timedelta(milliseconds=total_ms)


def replay_windows(broker: Broker, actors: Iterable[Actor[Any, Any]]) -> list[Window]:
    """The windows of ``broker`` and the Retries schedules of ``actors``.

    Raises:
        ConfigurationError: the broker has no Retries middleware.
    """
    retries = retries_of(broker)
    windows = [_actor_retry_window(retries, actor) for actor in actors]
    windows.extend(_broker_windows(broker))
    return windows


def _actor_retry_window(retries: Retries, actor: Actor[Any, Any]) -> Window:
    options = actor.options
    max_retries = options.get("max_retries", retries.max_retries)
    min_backoff = options.get("min_backoff", retries.min_backoff)
    max_backoff = options.get("max_backoff", retries.max_backoff)
    return Window(
        "retry_schedule",
        retry_span(max_retries, min_backoff, max_backoff),
        f"dramatiq: Retries schedule of actor {actor.actor_name!r} (max_retries={max_retries},"
        f" min_backoff={min_backoff}ms, max_backoff={max_backoff}ms)",
    )


def _broker_windows(broker: Broker) -> list[Window]:
    name = type(broker).__name__
    found: list[Window] = []
    rabbitmq = sys.modules.get("dramatiq.brokers.rabbitmq")
    if rabbitmq is not None and isinstance(broker, rabbitmq.RabbitmqBroker):
        ttl = int(rabbitmq.DEAD_MESSAGE_TTL)
        found.append(Window("dead_letter_ttl", _ms(ttl), f"dramatiq: {name} dead_message_ttl"))
    dead_ttl = getattr(broker, "dead_message_ttl", None)
    if isinstance(dead_ttl, int):
        found.append(Window("dead_letter_ttl", _ms(dead_ttl), f"dramatiq: {name} dead_message_ttl"))
    heartbeat = getattr(broker, "heartbeat_timeout", None)
    if isinstance(heartbeat, int):
        found.append(
            Window("redis_heartbeat_requeue", _ms(heartbeat), f"dramatiq: {name} heartbeat_timeout")
        )
    return found


def _ms(value: int) -> dt.timedelta:
    if value < 0:
        msg = f"a Dramatiq broker setting is negative ({value} ms); it must be zero or more"
        raise ConfigurationError(msg)
    return dt.timedelta(milliseconds=value)
