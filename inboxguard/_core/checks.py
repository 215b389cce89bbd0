"""Configuration checks every service shares: table prefixes and clocks.

Each check raises :class:`~inboxguard.errors.ConfigurationError` naming the
argument and the fix, so the inbox, the outbox and the effect ledger refuse
the same mistakes with the same words.
"""

from __future__ import annotations

import re

from inboxguard._core.clock import Clock, utc_now
from inboxguard.errors import ConfigurationError

__all__ = ["IDENTIFIER_LIMIT", "TABLE_PREFIX_PATTERN", "check_clock", "check_table_prefix"]

#: What a table prefix may look like: letters, digits and underscores, not
#: starting with a digit (its length is bounded separately, see below).
TABLE_PREFIX_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: The longest identifier every supported database accepts (PostgreSQL: 63
#: bytes; MariaDB/MySQL: 64 characters; SQLite: no limit).
IDENTIFIER_LIMIT = 63


def check_table_prefix(prefix: object, *, max_length: int | None = None) -> str:
    """Return ``prefix`` if it is a usable table prefix, else raise ConfigurationError.

    ``max_length`` bounds its length; the persistence layer passes the bound
    that keeps every table, index and constraint name it derives from the
    prefix within :data:`IDENTIFIER_LIMIT`.
    """
    if not isinstance(prefix, str) or not TABLE_PREFIX_PATTERN.match(prefix):
        msg = (
            f"table_prefix {prefix!r} must be letters, digits and underscores, not"
            " starting with a digit, e.g. 'inboxguard_'"
        )
        raise ConfigurationError(msg)
    if max_length is not None and len(prefix) > max_length:
        msg = (
            f"table_prefix {prefix!r} is {len(prefix)} characters long; at most {max_length}"
            f" fit, because the longest table, index or constraint name built from it must"
            f" stay within {IDENTIFIER_LIMIT} characters (PostgreSQL's limit): shorten it"
        )
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
