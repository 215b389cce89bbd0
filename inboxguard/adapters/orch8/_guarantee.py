"""The guarantee facts of a guarded Orch8 task (for ``inboxguard guarantees``).

The engine settles a task only when the worker completes or fails it, so the
delivery mode is at least once; the replay windows are the ones the worker
declares (the block's retry policy and the reaper's timeout), because the
engine's settings are out of the worker's sight.
"""

from __future__ import annotations

import datetime as dt

from inboxguard._core.guarantee import GuaranteeFact, check_declared_guarantee
from inboxguard._core.handlers import (
    HandlerFacts,
    Registration,
    describe_command_id,
    register_handler,
)
from inboxguard._core.retention import Window, format_duration
from inboxguard.inbox import Inbox

__all__ = ["KIND", "register_task", "windows_of"]

KIND = "Orch8 task"


def windows_of(
    handler_name: str, retry_window: dt.timedelta, reaper_window: dt.timedelta
) -> list[Window]:
    """The two windows through which a step's task can come back."""
    return [
        Window(
            "orch8_retry_window",
            retry_window,
            f"orch8: guarded({handler_name!r}, retry_window={format_duration(retry_window)})",
        ),
        Window(
            "orch8_reaper_window",
            reaper_window,
            f"orch8: guarded({handler_name!r}, reaper_window={format_duration(reaper_window)})",
        ),
    ]


def register_task(
    inbox: Inbox,
    handler: str,
    *,
    consumer: str,
    command_id: object,
    exclude: tuple[str, ...],
    retry_window: dt.timedelta,
    reaper_window: dt.timedelta,
    guarantee: object,
) -> None:
    """List a guarded Orch8 handler in its inbox's registry of guarded handlers.

    Raises:
        ConfigurationError: ``guarantee`` is not a Guarantee or declares a
            field derived here.
    """
    declared = check_declared_guarantee(guarantee, f"{KIND} {consumer!r}", delivery_derived=True)
    identity = (
        "step identity (instance_id/block_id)"
        if command_id is None
        else f"params key {command_id!r}"
        if isinstance(command_id, str)
        else describe_command_id(command_id)
    )
    windows = windows_of(consumer, retry_window, reaper_window)
    delivery = GuaranteeFact(
        "at least once: the engine offers a task again until a worker holding its claim"
        " completes or fails it; the adapter completes only after the transaction commits",
        settings={
            "retry_window": format_duration(retry_window),
            "reaper_window": format_duration(reaper_window),
        },
    )

    def facts() -> HandlerFacts:
        return HandlerFacts(
            kind=KIND,
            handler=handler,
            consumer=consumer,
            inbox=inbox,
            declared=declared,
            identity={"command_id": identity, "exclude": ", ".join(exclude) or "none"},
            delivery=delivery,
            windows=windows,
            retry_horizon=windows[0],
        )

    register_handler(inbox, Registration(KIND, f"{handler} ({consumer})", None, facts))
