"""Argument checks of the outbox and its dispatcher: each names the argument
and the fix, and refuses before anything runs."""

from __future__ import annotations

import datetime as dt

from inboxguard.errors import ConfigurationError

__all__ = ["check_dispatcher_arguments", "check_positive_int"]


def check_positive_int(name: str, value: object) -> int:
    """Return ``value`` if it is an int of at least 1, else raise ConfigurationError.

    A batch size or a limit of zero or less would never finish a batched loop
    (or, on SQLite, mean "no limit"), so it is refused, not clamped.
    """
    if type(value) is not int or value < 1:
        msg = f"{name} must be a positive int, got {value!r}"
        raise ConfigurationError(msg)
    return value


def check_dispatcher_arguments(
    transport: object,
    batch_size: object,
    max_attempts: object,
    lease: object,
    poll_interval: object,
) -> None:
    """Refuse a dispatcher argument that cannot work, naming it."""
    if not callable(transport):
        msg = f"transport must be a callable taking an OutboxMessage, got {transport!r}"
        raise ConfigurationError(msg)
    check_positive_int("batch_size", batch_size)
    check_positive_int("max_attempts", max_attempts)
    for name, span in (("lease", lease), ("poll_interval", poll_interval)):
        if not isinstance(span, dt.timedelta) or span <= dt.timedelta(0):
            msg = f"{name} must be a positive timedelta, got {span!r}"
            raise ConfigurationError(msg)
