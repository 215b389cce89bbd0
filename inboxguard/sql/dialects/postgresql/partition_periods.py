"""The periods of PostgreSQL's partitioned evidence: the accepted
``Inbox(partitioning=...)`` values, their check, and the first instant of
each period (naive UTC), which name and bound the partitions
(:mod:`.partitions`)."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from inboxguard._core.checks import IDENTIFIER_LIMIT
from inboxguard.errors import ConfigurationError

__all__ = ["GRANULARITIES", "Granularity", "check_granularity", "next_period", "period_start"]

Granularity = Literal["daily", "weekly", "monthly"]
#: The accepted values of ``Inbox(partitioning=...)``.
GRANULARITIES: tuple[str, ...] = ("daily", "weekly", "monthly")
_SUFFIX = "_p20260101_key"  # the longest name derived from a partition


def check_granularity(value: object, prefix: str) -> Granularity | None:
    """Return a valid ``partitioning`` value (None: unpartitioned).

    Raises:
        ConfigurationError: not one of :data:`GRANULARITIES`, or the table
            prefix leaves no room for the partition names.
    """
    if value is None:
        return None
    if not isinstance(value, str) or value not in GRANULARITIES:
        choices = ", ".join(repr(g) for g in GRANULARITIES)
        msg = (
            f"partitioning must be one of {choices} or None, got {value!r}; e.g."
            " Inbox(engine, retention=..., partitioning='daily')"
        )
        raise ConfigurationError(msg)
    longest = len(f"{prefix}inbox{_SUFFIX}")
    if longest > IDENTIFIER_LIMIT:
        msg = (
            f"table_prefix {prefix!r} is too long for partitioning: the partition names"
            f" (e.g. {prefix}inbox{_SUFFIX}) would exceed {IDENTIFIER_LIMIT} characters;"
            f" use a prefix of at most {IDENTIFIER_LIMIT - len('inbox' + _SUFFIX)} characters"
        )
        raise ConfigurationError(msg)
    return value  # type: ignore[return-value]


def period_start(at: dt.datetime, granularity: Granularity) -> dt.datetime:
    """The first instant (naive UTC) of the period holding ``at``."""
    day = at.astimezone(dt.UTC).replace(tzinfo=None, hour=0, minute=0, second=0, microsecond=0)
    if granularity == "weekly":
        return day - dt.timedelta(days=day.weekday())
    if granularity == "monthly":
        return day.replace(day=1)
    return day


def next_period(start: dt.datetime, granularity: Granularity) -> dt.datetime:
    """The first instant of the period after the one starting at ``start``."""
    if granularity == "daily":
        return start + dt.timedelta(days=1)
    if granularity == "weekly":
        return start + dt.timedelta(days=7)
    return (start.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
