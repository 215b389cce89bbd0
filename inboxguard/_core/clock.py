"""Time: the clock contract shared by the inbox, the outbox and the ledger."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from inboxguard.errors import ConfigurationError

__all__ = ["Clock", "as_utc", "checked_now", "utc_now"]

#: A zero-argument callable returning a timezone-aware datetime.
Clock = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    """The default clock: the current time in UTC."""
    return dt.datetime.now(dt.UTC)


def checked_now(clock: Clock) -> dt.datetime:
    """Call ``clock`` and return its time in UTC.

    Every time computed from it (expiry, horizon, purge cut-off, lease end) is
    then real elapsed time: adding 30 days to a Europe/Berlin wall clock
    across the March change would give 29 days 23 hours.

    Raises:
        ConfigurationError: the clock returned no timezone-aware datetime.
    """
    now = clock()
    if not isinstance(now, dt.datetime) or now.utcoffset() is None:
        msg = f"the clock returned {now!r}; it must return a timezone-aware datetime"
        raise ConfigurationError(msg)
    return now.astimezone(dt.UTC)


def as_utc(value: object, name: str) -> dt.datetime:
    """Return an aware datetime ``value`` in UTC, before any arithmetic on it.

    Raises:
        ConfigurationError: ``value`` (named ``name``) is not a timezone-aware
            datetime.
    """
    if not isinstance(value, dt.datetime) or value.utcoffset() is None:
        msg = f"{name} must be a timezone-aware datetime, got {value!r}"
        raise ConfigurationError(msg)
    return value.astimezone(dt.UTC)
