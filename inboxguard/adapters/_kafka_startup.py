"""What a guarded Kafka consumer (aiokafka or FastStream) checks before it consumes.

* Offsets are committed by the guard only: a consumer with
  ``enable_auto_commit=True`` would commit an offset on a timer, before its
  record's transaction commits, and a worker killed in between loses the
  record. It is refused, and so is a consumer without a ``group_id`` (no
  committed offsets at all).
* Replay windows: a consumer group that resets to ``earliest`` (its offsets
  expired, the group was renamed, an operator reset it) reads the topic again
  from its oldest record, so the topic's retention (``retention.ms``, read
  from the broker; Kafka's default of 7 days when the topic sets none;
  unbounded for ``-1``) is a window the evidence must outlive. A group that
  resets to ``latest`` replays nothing by itself. The in-process retry
  schedule is a window too.

Imports no Kafka client at module level: aiokafka's admin client is imported
when the retention is read.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from inboxguard._core.retention import Window
from inboxguard.errors import ConfigurationError

__all__ = [
    "DEFAULT_TOPIC_RETENTION",
    "check_consumer",
    "reset_windows",
    "retry_window",
    "topic_retentions",
]

#: Kafka's ``log.retention.hours`` default (168 h), assumed for a topic that sets none.
DEFAULT_TOPIC_RETENTION = dt.timedelta(days=7)
#: Kafka's error code for a topic that does not exist (yet).
_UNKNOWN_TOPIC = 3
_MISSING = "the topic does not exist yet: the broker default of 7 days assumed"
#: Seconds the broker may take to describe the topics at start-up.
DESCRIBE_TIMEOUT = 30.0


def check_consumer(consumer: Any, where: str) -> None:
    """Refuse an aiokafka consumer whose offsets are committed before the
    transaction (auto-commit) or not at all (no group).

    Raises:
        ConfigurationError: naming the setting and its fix.
    """
    if getattr(consumer, "_enable_auto_commit", False):
        msg = (
            f"{where}: the consumer has enable_auto_commit=True, which commits offsets on a"
            " timer, before the record's transaction commits (a worker killed in between"
            " loses the record); create it with enable_auto_commit=False: the guard"
            " commits each offset after its evidence commits"
        )
        raise ConfigurationError(msg)
    if getattr(consumer, "_group_id", None) is None:
        msg = (
            f"{where}: the consumer has no group_id, so no offset is ever committed and a"
            " restarted worker starts over; create it with group_id=..."
        )
        raise ConfigurationError(msg)


def reset_of(consumer: Any) -> str:
    """The consumer's ``auto_offset_reset`` (``latest`` when unreadable)."""
    return str(getattr(consumer, "_auto_offset_reset", "latest") or "latest")


def retry_window(where: str, max_attempts: int, retry_delay: dt.timedelta) -> Window:
    """The span of the in-process retries of one record."""
    return Window(
        "retry_schedule",
        retry_delay * (max_attempts - 1),
        f"{where}: max_attempts={max_attempts}, retry_delay={retry_delay}",
    )


def reset_windows(
    where: str, reset: str, retentions: dict[str, tuple[dt.timedelta, str]]
) -> list[Window]:
    """The windows a group resetting to ``reset`` opens on topics kept as ``retentions``
    (``topic -> (length, how it was read)``)."""
    if reset != "earliest":
        return []
    return [
        Window(
            "kafka_topic_retention",
            length,
            f"{where}: auto_offset_reset='earliest' on topic {topic!r} ({how})",
        )
        for topic, (length, how) in retentions.items()
    ]


async def topic_retentions(
    bootstrap_servers: str | Sequence[str], topics: Iterable[str]
) -> dict[str, tuple[dt.timedelta, str]]:
    """Each topic's retention as the broker describes it.

    Raises:
        ConfigurationError: the broker could not describe a topic, or its
            ``retention.ms`` is not a number.
    """
    from aiokafka.admin import AIOKafkaAdminClient  # noqa: PLC0415 - only at start-up
    from aiokafka.admin.config_resource import (  # noqa: PLC0415
        ConfigResource,
        ConfigResourceType,
    )

    names = sorted(set(topics))
    if not names:
        return {}
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap_servers, request_timeout_ms=int(DESCRIBE_TIMEOUT * 1000)
    )
    await admin.start()
    try:
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name) for name in names]
        )
    finally:
        await admin.close()
    found: dict[str, tuple[dt.timedelta, str]] = {}
    for response in responses:
        for error_code, error_message, _type, name, entries in _resources(response):
            if error_code == _UNKNOWN_TOPIC:
                found[name] = (DEFAULT_TOPIC_RETENTION, _MISSING)
                continue
            if error_code:
                msg = (
                    f"the broker could not describe topic {name!r} ({error_message}); the"
                    " guard reads its retention.ms at start-up"
                )
                raise ConfigurationError(msg)
            found[name] = _retention(name, entries)
    return found


def _resources(response: Any) -> list[tuple[int, str, int, str, list[Any]]]:
    return [(r[0], r[1], r[2], r[3], list(r[4])) for r in response.resources]


def _retention(topic: str, entries: list[Any]) -> tuple[dt.timedelta, str]:
    value = next((e[1] for e in entries if e[0] == "retention.ms"), None)
    if value is None:
        return DEFAULT_TOPIC_RETENTION, "no retention.ms: the broker default of 7 days assumed"
    try:
        ms = int(value)
    except (TypeError, ValueError):
        msg = f"topic {topic!r} has retention.ms={value!r}, which is not a number of ms"
        raise ConfigurationError(msg) from None
    if ms < 0:
        return dt.timedelta.max, "retention.ms=-1: kept forever"
    return dt.timedelta(milliseconds=ms), f"retention.ms={ms}"


def topic_retentions_blocking(
    bootstrap_servers: str | Sequence[str], topics: Iterable[str]
) -> dict[str, tuple[dt.timedelta, str]]:
    """:func:`topic_retentions` from synchronous code, even inside a running
    event loop (a start-up hook): on a thread of its own, with a deadline."""
    names = list(topics)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="inboxguard-kafka") as pool:
        future = pool.submit(asyncio.run, topic_retentions(bootstrap_servers, names))
        return future.result(DESCRIBE_TIMEOUT * 2)
