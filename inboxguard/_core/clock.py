"""Time: the clock contract shared by the inbox, the outbox and the ledger."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from inboxguard.errors import ConfigurationError

__all__ = ["Clock", "checked_now", "utc_now"]

#: A zero-argument callable returning a timezone-aware datetime.
Clock = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    """The default clock: the current time in UTC."""
    return dt.datetime.now(dt.UTC)


def checked_now(clock: Clock) -> dt.datetime:
    """Call ``clock`` and insist on an aware datetime.

    Raises:
        ConfigurationError: the clock returned something else.
    """
    now = clock()
    if not isinstance(now, dt.datetime) or now.utcoffset() is None:
        msg = f"the clock returned {now!r}; it must return a timezone-aware datetime"
        raise ConfigurationError(msg)
    return now
