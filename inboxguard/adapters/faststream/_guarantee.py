"""Guarded FastStream subscribers in the inbox's registry of guarded handlers.

Each handler of a subscriber that an :class:`InboxMiddleware` guards is
listed under its broker (RabbitMQ, Redis Streams, NATS JetStream, Kafka),
with its consumer name and command ID as the middleware resolves them, and
its settlement rows read from the FastStream settlement table, the same rows
``check_startup`` and the delivery path judge: a value the table refuses
shows as a contradiction of the delivery mode. The registrations are made
by ``check_startup`` and, for ``inboxguard guarantees --app`` naming a
broker (or a module holding one), by a preparer that finds the guards in
the subscribers' middlewares. Facts are read when a table is asked for.

Imports no broker: subscribers are read by attribute.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, Protocol

from inboxguard._core.guarantee import GuaranteeFact
from inboxguard._core.handlers import add_preparer
from inboxguard._core.retention import Window, format_duration
from inboxguard.adapters._guarantees import register_consumer
from inboxguard.adapters._redelivery import Redelivery
from inboxguard.adapters.faststream._kafka import is_kafka
from inboxguard.adapters.faststream._options import (
    HandlerOptions,
    handler_name,
    handlers_of,
    options_for,
)
from inboxguard.adapters.faststream._settlement import (
    FASTSTREAM_SETTLEMENT,
    claimed_groups,
    group_of,
    settlement_values,
)
from inboxguard.adapters.faststream._startup import replay_windows, subscriber_name
from inboxguard.errors import ConfigurationError
from inboxguard.inbox import InboxStore

__all__ = ["KIND", "register_subscribers"]

#: The kind of handler the guarantee tables show.
KIND = "faststream subscriber"
#: The attribute marking a guard (``InboxMiddleware``) for the preparer.
MARK = "__inboxguard_faststream_guard__"

_BROKERS = {
    "faststream.rabbit.": "RabbitMQ",
    "faststream.redis.": "Redis Streams",
    "faststream.nats.": "NATS JetStream",
    "faststream.kafka.": "Kafka",
}
_DELIVERY = {
    "RabbitMQ": (
        "at least once: the middleware acks a message only after its transaction commits;"
        " a retry publishes a copy with the next attempt to the subscriber's queue before"
        " the original is acked, and a refused one is rejected without requeue"
    ),
    "Redis Streams": (
        "at least once: an entry is acknowledged (XACK) only after its transaction commits;"
        " a retry adds a copy with the next attempt before the original is acknowledged,"
        " and an entry a killed worker left pending is claimed after min_idle_time"
    ),
    "NATS JetStream": (
        "at least once: a message is acknowledged only after its transaction commits;"
        " a retry is a nack with retry_delay, the server redelivering it, and a refused"
        " one is terminated"
    ),
    "Kafka": (
        "at least once, by offsets: a record's offset is committed only after its"
        " transaction commits (or a quarantine record holds it); a retry produces a copy"
        " with the next attempt before the offset is committed"
    ),
}


class ListedGuard(Protocol):
    """What the registry reads of an ``InboxMiddleware``."""

    inbox: InboxStore
    default: HandlerOptions
    policy: Redelivery
    retry_delay: dt.timedelta
    windows: dict[str, dt.timedelta]

    def guards(self, subscriber: Any) -> bool: ...


def register_subscribers(guard: ListedGuard, broker: Any) -> None:
    """List each handler of each subscriber of ``broker`` that ``guard`` guards
    (read again whenever a table is asked for). Never raises for a
    subscriber's settings: a refused one shows as a contradiction."""
    subscribers = [s for s in getattr(broker, "subscribers", ()) or () if guard.guards(s)]
    for sub in subscribers:
        for fn in handlers_of(sub):
            _register(guard, broker, sub, subscribers, fn)


def _register(
    guard: ListedGuard, broker: Any, sub: Any, subscribers: Sequence[Any], fn: Any
) -> None:
    options = options_for(fn, guard.default)
    register_consumer(
        guard.inbox,
        KIND,
        handler_name(fn),
        consumer=options.consumer,
        command_id=options.id_spec,
        exclude=options.exclude,
        max_attempts=guard.policy.max_attempts,
        retry_delay=guard.retry_delay,
        guarantee=None,
        delivery=lambda: _delivery(guard, sub, subscribers),
        early_acks=lambda: _refusals(guard, sub, subscribers),
        windows=lambda: _windows(guard, sub),
        settled_by="its offset commit" if is_kafka(sub) else "the ack",
        redelivered=(
            "when its partition's next owner (the restarted worker, or another member of the"
            " group after the rebalance) reads from the last committed offset"
            if is_kafka(sub)
            else None
        ),
        owner=broker,
    )


def broker_of(sub: Any) -> str:
    """The broker a subscriber reads, as the tables name it."""
    module = type(sub).__module__
    return next((name for prefix, name in _BROKERS.items() if module.startswith(prefix)), "?")


def _source(sub: Any) -> str:
    """What a subscriber reads: its queue, stream and group, subject or topics."""
    stream = getattr(sub, "stream_sub", None)
    if stream is not None:
        return f"stream {stream.name} group {stream.group}"
    queue = getattr(getattr(sub, "queue", None), "name", None)
    if queue:
        return f"queue {queue}"
    topics = getattr(sub, "topics", None)
    if topics:
        return f"topics {', '.join(str(getattr(t, 'name', t)) for t in topics)}"
    subject = getattr(sub, "subject", None)
    if subject is not None:
        return f"subject {getattr(subject, 'broker_address', subject)}"
    return subscriber_name(sub)


def _values(sub: Any, subscribers: Sequence[Any]) -> dict[str, Any]:
    values = settlement_values(sub)
    group = group_of(sub)
    if group is not None:
        values["claiming subscriber"] = claimed_groups(subscribers).get(group, False)
    return values


def _delivery(guard: ListedGuard, sub: Any, subscribers: Sequence[Any]) -> GuaranteeFact:
    values = _values(sub, subscribers)
    rows = FASTSTREAM_SETTLEMENT.shown(values)
    broker = broker_of(sub)
    return GuaranteeFact(
        _DELIVERY.get(broker, "unknown: not a broker the middleware settles"),
        settings={
            "broker": broker,
            "reads": _source(sub),
            "max_attempts": guard.policy.max_attempts,
            "retry_delay": format_duration(guard.retry_delay),
            **{name: rows[name] for name in values},
        },
    )


def _refusals(guard: ListedGuard, sub: Any, subscribers: Sequence[Any]) -> list[tuple[str, str]]:
    context = {"max_attempts": guard.policy.max_attempts}
    found = FASTSTREAM_SETTLEMENT.refusals(_values(sub, subscribers), context=context)
    try:  # what check_startup refuses besides the table: a Kafka policy, core NATS...
        replay_windows([sub], max_attempts=guard.policy.max_attempts, retry_delay=guard.retry_delay)
    except ConfigurationError as error:
        found.append(("ack_policy" if is_kafka(sub) else "subscriber", str(error)))
    return found


def _windows(guard: ListedGuard, sub: Any) -> list[Window]:
    declared = [
        Window(name, length, f"faststream: InboxMiddleware(windows={{{name!r}: ...}})")
        for name, length in guard.windows.items()
    ]
    try:
        found = replay_windows(
            [sub], max_attempts=guard.policy.max_attempts, retry_delay=guard.retry_delay
        )
    except ConfigurationError:
        found = []  # shown as a contradiction by _refusals
    # The first window is the retry schedule, which register_consumer adds itself.
    return [*found[1:], *declared]


def _prepare(app: object) -> None:
    """Register the guarded subscribers of a FastStream broker (any other
    object is ignored)."""
    if not type(app).__module__.startswith("faststream."):
        return
    guards: dict[int, Any] = {}
    for sub in getattr(app, "subscribers", ()) or ():
        for middleware in getattr(sub, "_broker_middlewares", ()) or ():
            if getattr(middleware, MARK, False):
                guards[id(middleware)] = middleware
    for guard in guards.values():
        register_subscribers(guard, app)


add_preparer("faststream", _prepare)
