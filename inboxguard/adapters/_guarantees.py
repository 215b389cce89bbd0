"""The guarantee facts of a kombu, aio-pika or Kafka consumer (no framework imported).

These consumers ack after the transaction commits and retry by publishing a
copy before acking the original, so their delivery mode and retry horizon
come from ``max_attempts`` and ``retry_delay``, beside every row of the
adapter's settlement table (a row judged on each delivery, such as
``no_ack``, which is set on the consumer out of the callback's sight, is
shown with the values it accepts). A consumer that settles otherwise (Kafka
commits offsets, it acks nothing) passes its own ``delivery`` fact,
``early_acks`` and extra replay ``windows``, each read when the table is
asked for, and says what settles a delivery and how an unsettled one comes
back (the lost-ack example).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from inboxguard._core.guarantee import GuaranteeFact, Setting, check_declared_guarantee
from inboxguard._core.handlers import (
    HandlerFacts,
    Registration,
    describe_command_id,
    register_handler,
)
from inboxguard._core.retention import Window, format_duration

__all__ = ["register_consumer"]


def register_consumer(  # noqa: PLR0913 - one fact per argument
    inbox: Any,
    kind: str,
    handler: str,
    *,
    consumer: str,
    command_id: object,
    exclude: Iterable[str],
    max_attempts: int,
    retry_delay: dt.timedelta,
    guarantee: object,
    delivery: Callable[[], GuaranteeFact] | None = None,
    early_acks: Callable[[], Sequence[tuple[str, str]]] = tuple,
    windows: Callable[[], Sequence[Window]] = tuple,
    settled_by: str = "the ack",
    redelivered: str | None = None,
    settlement: Mapping[str, Setting] | None = None,
    owner: object | None = None,
) -> None:
    """List a guarded consumer callback in its inbox's registry of guarded handlers
    (``settlement``: its settlement table's rows, as ``SettlementTable.shown``
    gives them; ``owner``: the framework object it is listed under, such as
    a FastStream broker, None for a plain consumer).

    Raises:
        ConfigurationError: ``guarantee`` is not a Guarantee or declares a
            field derived here.
    """
    declared = check_declared_guarantee(guarantee, f"{kind} {consumer!r}", delivery_derived=True)
    excluded = ", ".join(exclude) or "none"
    span = retry_delay * (max_attempts - 1)
    retry = Window(
        "retry_schedule",
        span,
        f"{kind} {consumer}: max_attempts={max_attempts} x retry_delay="
        f"{format_duration(retry_delay)}",
    )
    queue_delivery = GuaranteeFact(
        "at least once: the callback acks only after the transaction commits, a retry"
        " publishes its copy before the original is acked, and a delivery the broker"
        " already forgot (no_ack) is quarantined, never run",
        settings={
            "max_attempts": max_attempts,
            "retry_delay": format_duration(retry_delay),
            **(settlement or {}),
        },
    )

    def facts() -> HandlerFacts:
        return HandlerFacts(
            kind=kind,
            handler=handler,
            consumer=consumer,
            inbox=inbox,
            declared=declared,
            identity={"command_id": describe_command_id(command_id), "exclude": excluded},
            delivery=delivery() if delivery is not None else queue_delivery,
            windows=[*([retry] if span else []), *windows()],
            retry_horizon=retry,
            early_acks=early_acks(),
            settled_by=settled_by,
            redelivered=redelivered,
            module_path_consumer="consumer" if consumer == handler else None,
        )

    register_handler(inbox, Registration(kind, f"{handler} ({consumer})", owner, facts))
