"""A guarded Kafka consumer in the inbox's registry of guarded handlers.

Kafka commits offsets, it acknowledges nothing: the delivery mode says when
an offset is committed (after the record's transaction commits, or once a
quarantine record holds it) and that a failed attempt runs again in place,
holding its partition. ``enable_auto_commit=True`` commits offsets on a
timer, before the transaction, and shows as a contradiction of the delivery
mode (start-up refuses it too). The replay windows are the in-process retry
schedule, the windows the consumer declares, and, once it started, the
retention of each topic a group resetting to ``earliest`` reads again.

Imports no Kafka client: the consumer's settings are read from its attributes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inboxguard._core.guarantee import GuaranteeFact
from inboxguard._core.retention import Window, format_duration
from inboxguard.adapters._guarantees import register_consumer
from inboxguard.adapters._kafka_startup import reset_of

#: A ``GuardedConsumer``, read by attribute: its module imports this one.
GuardedConsumer = Any

__all__ = ["KIND", "register"]

#: The kind of handler the guarantee tables show.
KIND = "kafka consumer"


def register(guarded: GuardedConsumer, guarantee: object) -> None:
    """List ``guarded`` in its inbox's registry (read again whenever a table is asked for).

    Raises:
        ConfigurationError: ``guarantee`` is not a Guarantee or declares a
            field derived here.
    """
    register_consumer(
        guarded.inbox,
        KIND,
        f"kafka topics {', '.join(guarded.topics)}",
        consumer=guarded.name,
        command_id=guarded.command_id,
        exclude=guarded.reader.exclude,
        max_attempts=guarded.policy.max_attempts,
        retry_delay=guarded.reader_delay,
        guarantee=guarantee,
        delivery=lambda: _delivery(guarded),
        early_acks=lambda: _early_commits(guarded),
        windows=lambda: _windows(guarded),
        settled_by="its offset commit",
        redelivered=(
            "when its partition's next owner (the restarted worker, or another member of the"
            " group after the rebalance) reads from the last committed offset"
        ),
    )


def _delivery(guarded: GuardedConsumer) -> GuaranteeFact:
    consumer = guarded.consumer
    reset = reset_of(consumer)
    text = (
        "at least once, by offsets: a record's offset is committed only after its"
        " transaction commits (or a quarantine record holds it), so a worker killed in"
        " between leaves the offset behind and the record is read again as a duplicate;"
        " a failed attempt runs again in place, holding its partition"
    )
    if reset == "earliest" and not guarded.started:
        text += "; the topics' retention is read from the broker at start()"
    return GuaranteeFact(
        text,
        settings={
            "enable_auto_commit": bool(getattr(consumer, "_enable_auto_commit", False)),
            "group_id": getattr(consumer, "_group_id", None),
            "auto_offset_reset": reset,
            "max_attempts": guarded.policy.max_attempts,
            "retry_delay": format_duration(guarded.reader_delay),
            "watermarks": guarded.watermarks is not None,
        },
    )


def _early_commits(guarded: GuardedConsumer) -> list[tuple[str, str]]:
    consumer = guarded.consumer
    found = []
    if getattr(consumer, "_enable_auto_commit", False):
        found.append(
            (
                "enable_auto_commit",
                "enable_auto_commit=True commits offsets on a timer, before the record's"
                " transaction commits: a worker killed in between loses the record; create"
                " the consumer with enable_auto_commit=False",
            )
        )
    if getattr(consumer, "_group_id", None) is None:
        found.append(
            (
                "group_id",
                "the consumer has no group_id, so no offset is committed and a restarted"
                " worker reads from auto_offset_reset again; create it with group_id=...",
            )
        )
    return found


def _windows(guarded: GuardedConsumer) -> Sequence[Window]:
    where = f"{KIND} {guarded.name}"
    declared = [
        Window(name, length, f"{where}: windows={{{name!r}: ...}}")
        for name, length in guarded.windows.items()
    ]
    return [*declared, *(Window(w.name, w.length, w.source) for w in guarded.replay_windows)]
