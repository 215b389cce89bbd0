"""The FastStream settlement table: each subscriber setting that decides when a
guarded delivery is acked, redelivered or dropped, per broker, and the values
the middleware accepts.

``check_startup`` and the delivery path (the first message of each
subscriber) read it; docs/adapters/faststream.md shows it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from inboxguard.adapters._settlement import Choice, Setting, SettlementTable, equals

__all__ = [
    "FASTSTREAM_SETTLEMENT",
    "check_claimers",
    "check_subscriber",
    "claimed_groups",
    "group_of",
    "settlement_values",
]


def _value(value: Any) -> Any:
    """An enum member's value (``AckPolicy.ACK`` -> ``"ack"``), else the value."""
    return getattr(value, "value", value)


def _policy(*names: str) -> Any:
    def match(value: Any, _: Mapping[str, Any]) -> bool:
        return _value(value) in names

    return match


def _cap_above(value: Any, context: Mapping[str, Any]) -> bool:
    attempts = int(context.get("max_attempts", 0))
    return isinstance(value, int) and not isinstance(value, bool) and value > attempts


def _cap_at_most(value: Any, context: Mapping[str, Any]) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and 0 < value <= int(context.get("max_attempts", 0))
    )


def _present(value: Any, _: Mapping[str, Any]) -> bool:
    return isinstance(value, str) and bool(value)


FASTSTREAM_SETTLEMENT = SettlementTable(
    "FastStream",
    (
        Setting(
            "ack_policy",
            "subscriber (every broker)",
            (
                Choice(
                    "reject_on_error",
                    "accepts",
                    "the middleware settles each message itself after the commit",
                    _policy("reject_on_error"),
                ),
                Choice(
                    "nack_on_error",
                    "accepts",
                    "the middleware settles each message itself after the commit",
                    _policy("nack_on_error"),
                ),
                Choice(
                    "ack",
                    "accepts",
                    "the middleware settles each message itself after the commit",
                    _policy("ack"),
                ),
                Choice(
                    "manual",
                    "accepts",
                    "the middleware settles each message itself after the commit",
                    _policy("manual"),
                ),
                Choice(
                    "ack_first",
                    "refuses",
                    "FastStream acknowledges the message before its transaction commits:"
                    " a worker killed in between loses it",
                    _policy("ack_first"),
                ),
            ),
        ),
        Setting(
            "ConsumerConfig.ack_policy",
            "NATS JetStream consumer",
            (
                Choice(
                    "explicit",
                    "accepts",
                    "each message is acknowledged, or asked again, on its own",
                    _policy("explicit"),
                ),
                Choice(
                    "all",
                    "refuses",
                    "the next message's ack also acknowledges one waiting for its retry",
                    _policy("all"),
                ),
                Choice(
                    "none",
                    "refuses",
                    "nothing is acknowledged: a nack is ignored and a failed message is gone",
                    _policy("none"),
                ),
            ),
        ),
        Setting(
            "ConsumerConfig.max_deliver",
            "NATS JetStream consumer",
            (
                Choice("None", "accepts", "the server's default: no limit", equals(None)),
                Choice("-1", "accepts", "no limit", equals(-1)),
                Choice(
                    "> max_attempts",
                    "accepts",
                    "the server redelivers the last attempt's message, which the"
                    " middleware then quarantines",
                    _cap_above,
                ),
                Choice(
                    "1 .. max_attempts",
                    "refuses",
                    "the last attempt's nack asks for a redelivery the server never makes:"
                    " the command is gone without a quarantine record",
                    _cap_at_most,
                ),
            ),
        ),
        Setting(
            "StreamSub.group",
            "Redis Streams subscriber",
            (
                Choice("a group name", "accepts", "each entry stays pending until acked", _present),
                Choice(
                    "None",
                    "refuses",
                    "read without a consumer group nothing is acknowledged: a killed worker"
                    " loses its message",
                    equals(None),
                ),
            ),
        ),
        Setting(
            "StreamSub.no_ack",
            "Redis Streams subscriber",
            (
                Choice(
                    "False", "accepts", "an entry is acknowledged after the commit", equals(False)
                ),
                Choice(
                    "True",
                    "refuses",
                    "each entry is acknowledged as it is read, before its transaction commits",
                    equals(True),
                ),
            ),
        ),
        Setting(
            "claiming subscriber",
            "Redis Streams group",
            (
                Choice(
                    "present",
                    "accepts",
                    "a subscriber of the same stream and group with min_idle_time takes"
                    " over an entry a killed worker left pending",
                    equals(True),
                ),
                Choice(
                    "absent",
                    "refuses",
                    "an entry a killed worker left pending is never delivered again; add"
                    " StreamSub(name, group=..., consumer=..., min_idle_time=...)",
                    equals(False),
                ),
            ),
        ),
    ),
)


def settlement_values(sub: Any) -> dict[str, Any]:
    """The settlement settings of one subscriber, by row name (only those of
    its broker)."""
    values: dict[str, Any] = {"ack_policy": getattr(sub, "ack_policy", None)}
    module = type(sub).__module__
    if module.startswith("faststream.nats.") and getattr(sub, "stream", None) is not None:
        config = getattr(sub, "config", None)
        values["ConsumerConfig.ack_policy"] = getattr(config, "ack_policy", None)
        values["ConsumerConfig.max_deliver"] = getattr(config, "max_deliver", None)
    stream = getattr(sub, "stream_sub", None) if module.startswith("faststream.redis.") else None
    if stream is not None:
        values["StreamSub.group"] = stream.group
        values["StreamSub.no_ack"] = bool(stream.no_ack)
    return values


def check_subscriber(sub: Any, where: str, max_attempts: int) -> None:
    """Refuse a subscriber whose settlement settings the table does not know to be safe.

    Raises:
        ConfigurationError: naming the setting and its safe values.
    """
    FASTSTREAM_SETTLEMENT.check(
        settlement_values(sub), where, context={"max_attempts": max_attempts}
    )


def group_of(sub: Any) -> tuple[str, str] | None:
    """The (stream, group) a Redis Streams subscriber reads as a group member, or None."""
    stream = getattr(sub, "stream_sub", None)
    if (
        stream is None
        or not stream.group
        or not type(sub).__module__.startswith("faststream.redis.")
    ):
        return None
    return (stream.name, stream.group)


def claimed_groups(subscribers: Iterable[Any]) -> dict[tuple[str, str], bool]:
    """Each Redis stream group the subscribers read, and whether one of them
    claims its idle pending entries (``min_idle_time``)."""
    groups: dict[tuple[str, str], bool] = {}
    for sub in subscribers:
        key = group_of(sub)
        if key is None:
            continue
        stream = sub.stream_sub
        claims = bool(stream.min_idle_time or getattr(stream, "claim_min_idle_time", None))
        groups[key] = groups.get(key, False) or claims
    return groups


def check_claimers(subscribers: Iterable[Any]) -> None:
    """Refuse a Redis stream group that no guarded subscriber claims from.

    Raises:
        ConfigurationError: a group read without a claiming subscriber.
    """
    for (name, group), claimed in sorted(claimed_groups(subscribers).items()):
        FASTSTREAM_SETTLEMENT.check(
            {"claiming subscriber": claimed}, f"Redis stream {name!r} group {group!r}"
        )
