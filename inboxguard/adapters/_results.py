"""Whether a guarded call's return value is stored as the command's result.

The result store is one more statement in the guard's transaction. It is
worth it only when a duplicate can hand the stored value to someone: a
Celery task whose result is kept, a Dramatiq actor whose result the Results
middleware stores, or any direct or eager call, whose caller reads the
return value. A worker delivery of a Celery task with ``ignore_result`` or
of a Dramatiq actor nothing stores the result of returns into the void, and
so would a duplicate's replay: there the value is returned but not stored,
and a duplicate returns ``None``.

Each adapter asks here once per delivery (:func:`celery_reads`,
:func:`dramatiq_reads`) and hands the answer to :func:`kept`; no framework
is imported (the task, request, broker and message are read by attribute).
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from inboxguard.inbox import InboxEntry

__all__ = ["celery_reads", "dramatiq_reads", "kept"]

T = TypeVar("T")


def kept(entry: InboxEntry, value: T, *, read: bool) -> T:
    """``value``, assigned as ``entry``'s result when a duplicate can replay it
    (``read``); otherwise the guard sends no result store."""
    if read:
        entry.result = value
    return value


def celery_reads(task: Any, request: Any) -> bool:
    """Whether anything can read the result of this delivery of ``task``.

    A direct call or an eager one (``apply()``, ``task_always_eager``) hands
    the value to its caller; a delivery with a link, a chain or a chord after
    it hands the value to the next task (Celery dispatches it whatever
    ``ignore_result`` says), so a duplicate must replay it; any other worker's
    delivery keeps it only when the effective ``ignore_result`` (the
    request's, else the task's) is false.
    """
    if getattr(request, "called_directly", True) or getattr(request, "is_eager", False):
        return True
    if any(getattr(request, name, None) for name in ("callbacks", "chain", "chord")):
        return True
    # Celery's own reading: a request that did not set ignore_result inherits the task's.
    ignore = vars(request).get("ignore_result") if hasattr(request, "__dict__") else None
    if ignore is None:
        ignore = getattr(task, "ignore_result", False)
    return not ignore


def dramatiq_reads(broker: Any, message: Any) -> bool:
    """Whether anything can read the result of this call of an actor.

    A direct call (``message`` None) hands the value to its caller, and a
    message piped into a next actor (``pipe_target``, not ``pipe_ignore``)
    hands it to that actor, so a duplicate must replay it; any other
    worker's delivery keeps it only when a ``Results`` middleware on
    ``broker`` would store it (its ``store_results`` for the message: the
    message's option, else the actor's, else the middleware's default).
    """
    if message is None:
        return True
    options = message.options
    if options.get("pipe_target") and not options.get("pipe_ignore"):
        return True
    actor_not_found, results = _dramatiq_types()
    for middleware in getattr(broker, "middleware", ()):
        if not isinstance(middleware, results):
            continue
        try:
            actor_options = broker.get_actor(message.actor_name).options
        except actor_not_found:
            return False
        default = actor_options.get("store_results", middleware.store_results)
        if options.get("store_results", default):
            return True
    return False


@functools.cache
def _dramatiq_types() -> tuple[type[Exception], type[Any]]:
    """Dramatiq's ``ActorNotFound`` and ``Results``, imported on the first
    Dramatiq delivery (no other adapter imports Dramatiq), then kept."""
    from dramatiq.errors import ActorNotFound  # noqa: PLC0415 - only the Dramatiq adapter asks
    from dramatiq.results import Results  # noqa: PLC0415

    return ActorNotFound, Results
