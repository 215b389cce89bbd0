"""Configuration checks every service shares: table prefixes and clocks.

Each check raises :class:`~inboxguard.errors.ConfigurationError` naming the
argument and the fix, so the inbox, the outbox and the effect ledger refuse
the same mistakes with the same words.
"""

from __future__ import annotations

import re

from inboxguard._core.clock import Clock, utc_now
from inboxguard.errors import ConfigurationError

__all__ = ["TABLE_PREFIX_PATTERN", "check_clock", "check_table_prefix"]

#: What a table prefix may look like: an SQL identifier of at most 40 characters.
TABLE_PREFIX_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}\Z")


def check_table_prefix(prefix: object) -> str:
    """Return ``prefix`` if it is a usable table prefix, else raise ConfigurationError."""
    if not isinstance(prefix, str) or not TABLE_PREFIX_PATTERN.match(prefix):
        msg = f"table_prefix {prefix!r} must match [A-Za-z_][A-Za-z0-9_]{{0,39}}"
        raise ConfigurationError(msg)
    return prefix


def check_clock(clock: object) -> Clock:
    """Return ``clock`` (or UTC now when None) if it is callable, else raise ConfigurationError."""
    if clock is None:
        return utc_now
    if not callable(clock):
        msg = f"clock must be a zero-argument callable, got {clock!r}"
        raise ConfigurationError(msg)
    return clock
