"""What a guarded FastStream worker checks before it consumes.

The replay windows each broker can tell from its subscribers' declarations
(RabbitMQ queue arguments, the idle time after which a Redis Streams
subscriber claims a pending message, a JetStream consumer's ``ack_wait``),
the retry schedule and the windows the user declares must fit inside the
inbox's evidence horizon; the inbox tables must exist; no guarded
subscriber may acknowledge before its transaction commits; and every
handler's consumer name is claimed once.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from inboxguard._core.retention import Window
from inboxguard.adapters._consumers import claim_consumer
from inboxguard.adapters._startup_checks import require_tables
from inboxguard.adapters.faststream._kafka import check_kafka_policy, is_kafka
from inboxguard.adapters.faststream._options import (
    HandlerOptions,
    handler_name,
    handlers_of,
    options_for,
)
from inboxguard.adapters.faststream._settlement import check_claimers, check_subscriber
from inboxguard.errors import ConfigurationError
from inboxguard.inbox import InboxStore

__all__ = ["check_subscribers", "replay_windows", "subscriber_name"]

logger = logging.getLogger("inboxguard.faststream")


def replay_windows(
    subscribers: Iterable[Any], *, max_attempts: int, retry_delay: dt.timedelta
) -> list[Window]:
    """The windows the guarded ``subscribers`` open, read from their declarations.

    Raises:
        ConfigurationError: a subscriber the inbox cannot guard, or a broker
            limit that would drop a message before the inbox gives up on it.
    """
    found = [
        Window(
            "retry_schedule",
            retry_delay * (max_attempts - 1),
            f"faststream: InboxMiddleware(max_attempts={max_attempts}, retry_delay={retry_delay})",
        )
    ]
    for sub in subscribers:
        found.extend(_windows_of(sub))
    return found


def _windows_of(sub: Any) -> list[Window]:
    module = type(sub).__module__
    where = f"subscriber {_name(sub)!r}"
    if module.startswith("faststream.rabbit."):
        return _rabbit(sub, where)
    if module.startswith("faststream.redis."):
        return _redis(sub, where)
    if module.startswith("faststream.nats."):
        return _nats(sub, where)
    if is_kafka(sub):
        check_kafka_policy(sub, where)
        return []  # the topics' retention is read from the cluster: kafka_windows
    msg = (
        f"InboxMiddleware cannot guard {where} ({type(sub).__name__}): only RabbitMQ"
        " queues, Redis Streams with a consumer group and NATS JetStream hold a message"
        " until its transaction commits"
    )
    raise ConfigurationError(msg)


def _rabbit(sub: Any, where: str) -> list[Window]:
    arguments: Mapping[str, Any] = getattr(sub.queue, "arguments", None) or {}
    ttl = arguments.get("x-message-ttl")
    if ttl is None:
        return []
    return [
        Window(
            "queue_message_ttl",
            _ms(ttl, f"{where}: x-message-ttl"),
            f"faststream: RabbitMQ queue {sub.queue.name!r} x-message-ttl",
        )
    ]


def _redis(sub: Any, where: str) -> list[Window]:
    stream = getattr(sub, "stream_sub", None)
    if stream is None:
        msg = (
            f"InboxMiddleware cannot guard {where}: Redis lists and Pub/Sub never"
            " redeliver a message; subscribe to a stream: StreamSub(name, group=...,"
            " consumer=...)"
        )
        raise ConfigurationError(msg)
    idle = stream.min_idle_time or stream.claim_min_idle_time
    if idle is None:
        return []
    return [
        Window(
            "redis_claim_idle",
            _ms(idle, f"{where}: min_idle_time"),
            f"faststream: Redis stream {stream.name!r} group {stream.group!r} claim idle time",
        )
    ]


def _nats(sub: Any, where: str) -> list[Window]:
    if getattr(sub, "stream", None) is None:
        msg = (
            f"InboxMiddleware cannot guard {where}: core NATS neither acknowledges nor"
            " redelivers; subscribe through JetStream (stream=JStream(...))"
        )
        raise ConfigurationError(msg)
    config = sub.config
    ack_wait = getattr(config, "ack_wait", None)
    found = [
        Window(
            "jetstream_ack_wait",
            dt.timedelta(seconds=30 if ack_wait is None else float(ack_wait)),
            f"faststream: JetStream consumer of {where} ack_wait"
            + (" (server default 30s)" if ack_wait is None else ""),
        )
    ]
    max_age = getattr(getattr(sub.stream, "config", None), "max_age", None)
    if max_age:
        found.append(
            Window(
                "jetstream_max_age",
                dt.timedelta(seconds=float(max_age)),
                f"faststream: JetStream stream {sub.stream.name!r} max_age",
            )
        )
    return found


def check_subscribers(
    inbox: InboxStore, subscribers: Iterable[Any], default: HandlerOptions, max_attempts: int
) -> list[tuple[str, str]]:
    """Check each subscriber against the settlement table and claim each
    handler's consumer name; return ``(handler, consumer)`` pairs.

    Raises:
        ConfigurationError: a settlement setting the table does not know to be
            safe (``AckPolicy.ACK_FIRST``, a JetStream ``ack_policy`` other
            than explicit, ``max_deliver`` not above ``max_attempts``, a Redis
            group without a claiming subscriber...), or a consumer name two
            handlers would share without both saying so.
    """
    subscribers = list(subscribers)
    claimed: list[tuple[str, str]] = []
    for sub in subscribers:
        if is_kafka(sub):
            check_kafka_policy(sub, f"subscriber {_name(sub)!r}")
        check_subscriber(
            sub, f"InboxMiddleware cannot guard subscriber {_name(sub)!r}", max_attempts
        )
        for fn in handlers_of(sub):
            options = options_for(fn, default)
            name = handler_name(fn)
            claim_consumer(
                inbox, options.consumer, name, shared=options.shared, option="shared_consumer"
            )
            claimed.append((name, options.consumer))
    check_claimers(subscribers)
    return claimed


def check_tables(inbox: InboxStore) -> None:
    """Refuse a database without the inbox's tables (see ``require_tables``)."""
    require_tables(inbox)


def _ms(value: object, what: str) -> dt.timedelta:
    if not isinstance(value, int | float) or value < 0:
        msg = f"{what} must be a non-negative number of milliseconds, got {value!r}"
        raise ConfigurationError(msg)
    return dt.timedelta(milliseconds=value)


def subscriber_name(sub: Any) -> str:
    """The name a refusal gives a subscriber."""
    return _name(sub)


def _name(sub: Any) -> str:
    for attr in ("call_name", "name"):
        value = getattr(sub, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(sub).__name__
