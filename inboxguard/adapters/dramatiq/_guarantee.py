"""What a guarded Dramatiq actor's guarantee table is read from.

The actor is registered when :class:`InboxMiddleware` guards it; its facts
are read when asked: the broker (Dramatiq acknowledges a message only after
the actor returned, so after the guarded transaction committed) and every
row of its settlement table as the worker's boot check reads it, the replay
windows the worker's start-up check discovers (the Retries schedule from
``max_retries``, ``min_backoff`` and ``max_backoff``, the dead-letter TTL, the
Redis heartbeat requeue), the command-ID spec and the consumer name.
"""

from __future__ import annotations

from typing import Any

from dramatiq import Actor, Broker

from inboxguard._core.guarantee import Guarantee, GuaranteeFact, check_declared_guarantee
from inboxguard._core.handlers import (
    HandlerFacts,
    Registration,
    describe_command_id,
    register_handler,
)
from inboxguard.adapters.dramatiq._settlement import DRAMATIQ_SETTLEMENT, settlement_values
from inboxguard.adapters.dramatiq._windows import replay_windows

__all__ = ["GUARANTEE_OPTION", "check_guarantee", "register_actor"]

#: Actor option declaring what only the user knows (an ``inboxguard.Guarantee``).
GUARANTEE_OPTION = "inbox_guarantee"
_KIND = "dramatiq actor"


def check_guarantee(value: object, actor_name: str) -> Guarantee | None:
    """The actor's declared ``inbox_guarantee``, once it is usable.

    Raises:
        ConfigurationError: not a Guarantee, or it declares a derived field.
    """
    return check_declared_guarantee(value, f"actor {actor_name!r}", delivery_derived=True)


def register_actor(
    inbox: Any, broker: Broker, actor: Actor[Any, Any], consumer: str, fn: Any
) -> None:
    """List a guarded actor (``fn``: the user's function) in its inbox's
    registry of guarded handlers.

    Raises:
        ConfigurationError: its ``inbox_guarantee`` is not a Guarantee or
            declares a field derived here.
    """
    declared = check_guarantee(actor.options.get(GUARANTEE_OPTION), actor.actor_name)

    def facts() -> HandlerFacts:
        return _facts(inbox, broker, actor, consumer, declared, fn)

    register_handler(inbox, Registration(_KIND, actor.actor_name, broker, facts))


def _facts(
    inbox: Any,
    broker: Broker,
    actor: Actor[Any, Any],
    consumer: str,
    declared: Guarantee | None,
    fn: Any,
) -> HandlerFacts:
    windows = replay_windows(broker, [actor])
    retry = next((w for w in windows if w.name == "retry_schedule"), None)
    options = actor.options
    exclude = options.get("inbox_exclude", ())
    excluded = exclude if isinstance(exclude, str) else ", ".join(exclude) or "none"
    module_path = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', '')}"
    return HandlerFacts(
        kind=_KIND,
        handler=actor.actor_name,
        consumer=consumer,
        inbox=inbox,
        declared=declared,
        identity={
            "inbox_command_id": describe_command_id(options.get("inbox_command_id")),
            "inbox_exclude": excluded,
        },
        delivery=GuaranteeFact(
            "at least once: Dramatiq acknowledges the message only after the actor returned,"
            " so after its transaction committed; a worker that dies first leaves it to be"
            " delivered again",
            settings={
                "broker": type(broker).__name__,
                "queue": actor.queue_name,
                # Every row of the settlement table, as the worker's boot check reads it.
                **DRAMATIQ_SETTLEMENT.shown(
                    settlement_values(broker, actor), unseen="not in effect: no such middleware"
                ),
            },
        ),
        windows=windows,
        retry_horizon=retry,
        module_path_consumer="inbox_consumer" if consumer == module_path else None,
    )
