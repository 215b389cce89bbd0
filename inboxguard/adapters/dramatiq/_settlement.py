"""The Dramatiq settlement table: each broker and actor setting that decides
when a guarded message is acked, retried or failed into the dead-letter
queue, and the values the middleware accepts.

Read at worker boot (``InboxMiddleware.before_worker_boot``), before the
replay windows are checked against the evidence horizon, so a value this
table accepts is one whose retry schedule can be measured (``max_retries=None``
is refused here, naming the safe values, not left to the retention check);
rendered into docs/adapters/dramatiq.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dramatiq import Actor, Broker
from dramatiq.middleware import AgeLimit, Retries

from inboxguard.adapters._settlement import Choice, Setting, SettlementTable, equals

__all__ = ["DRAMATIQ_SETTLEMENT", "check_actors", "settlement_values"]


def _retries_at_least(low: int) -> Any:
    def match(value: Any, _: Mapping[str, Any]) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= low

    return match


def _callable(value: Any, _: Mapping[str, Any]) -> bool:
    return callable(value)


def _number(value: Any, _: Mapping[str, Any]) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


DRAMATIQ_SETTLEMENT = SettlementTable(
    "Dramatiq",
    (
        Setting(
            "Retries middleware",
            "broker",
            (
                Choice(
                    "present",
                    "accepts",
                    "a busy or transient attempt is re-enqueued by Retries",
                    equals(True),
                ),
                Choice(
                    "absent",
                    "refuses",
                    "a Retry is acknowledged and the command lost",
                    equals(False),
                ),
            ),
        ),
        Setting(
            "max_retries",
            "actor option / Retries",
            (
                Choice(
                    ">= 1",
                    "accepts",
                    "the last retry is quarantined (retries_exhausted) before Retries"
                    " fails it; one no record holds is given one more attempt",
                    _retries_at_least(1),
                ),
                Choice(
                    "0",
                    "adjusts",
                    "a first attempt no record holds (a database outage) gets the message's"
                    " own max_retries raised to 1, so Retries requeues it",
                    equals(0),
                ),
                Choice(
                    "None",
                    "refuses",
                    "retried without limit: the retry schedule has no end, so it outlives"
                    " any evidence horizon and a late retry could run the command again",
                    equals(None),
                ),
            ),
        ),
        Setting(
            "retry_when",
            "actor option / Retries",
            (
                Choice("None", "accepts", "max_retries decides", equals(None)),
                Choice(
                    "a callable",
                    "adjusts",
                    "called as Retries calls it; on an unrecorded last attempt the count"
                    " it sees is lowered by one",
                    _callable,
                ),
            ),
        ),
        Setting(
            "max_age",
            "actor option / AgeLimit",
            (
                Choice(
                    "None",
                    "accepts",
                    "age is judged by the inbox horizon, which quarantines a stale message",
                    equals(None),
                ),
                Choice(
                    "milliseconds",
                    "refuses",
                    "AgeLimit fails an older message into the dead-letter queue before the"
                    " guard sees it: no quarantine record",
                    _number,
                ),
            ),
        ),
    ),
)


def settlement_values(broker: Broker, actor: Actor[Any, Any]) -> dict[str, Any]:
    """The settlement settings of ``actor`` on ``broker``, by row name (an
    option falls back to its middleware's default; a row whose middleware is
    absent is left out)."""
    retries = next((m for m in broker.middleware if isinstance(m, Retries)), None)
    ages = next((m for m in broker.middleware if isinstance(m, AgeLimit)), None)
    options = actor.options
    values: dict[str, Any] = {"Retries middleware": retries is not None}
    if retries is not None:
        values["max_retries"] = options.get("max_retries", retries.max_retries)
        values["retry_when"] = options.get("retry_when", retries.retry_when)
    if ages is not None:
        values["max_age"] = options.get("max_age", ages.max_age)
    return values


def check_actors(broker: Broker, actors: Iterable[Actor[Any, Any]]) -> None:
    """Refuse guarded actors whose settlement settings the table does not know to be safe.

    Raises:
        ConfigurationError: naming the actor, the setting and its safe values.
    """
    for actor in actors:
        DRAMATIQ_SETTLEMENT.check(settlement_values(broker, actor), f"actor {actor.actor_name!r}")
