"""The settings an :class:`inboxguard.Inbox` is built with, checked before use."""

from __future__ import annotations

import datetime as dt

from inboxguard._core.checks import check_clock, check_table_prefix
from inboxguard.errors import ConfigurationError
from inboxguard.sql.connection import check_engine

__all__ = ["DEFAULT_LOCK_TIMEOUT", "check_settings"]

#: Default bound on waiting for another transaction's claim.
DEFAULT_LOCK_TIMEOUT = dt.timedelta(seconds=5)


def check_settings(
    engine: object, table_prefix: object, lock_timeout: object, clock: object
) -> None:
    """Refuse settings that cannot keep the guarantees, naming the fix.

    Raises:
        ConfigurationError: an async engine (or any non-Engine), a bad table
            prefix, a negative or non-timedelta lock timeout, a clock that
            is not callable.
    """
    check_engine(
        engine,
        async_hint=(
            "; pass a sync Engine on the same database (it serves schema creation,"
            " lookups and quarantine reads); guard_async() takes the AsyncSession"
            " and writes through its own AsyncEngine"
        ),
    )
    check_table_prefix(table_prefix)
    if lock_timeout is not None and (
        not isinstance(lock_timeout, dt.timedelta) or lock_timeout < dt.timedelta(0)
    ):
        msg = f"lock_timeout must be a non-negative timedelta or None, got {lock_timeout!r}"
        raise ConfigurationError(msg)
    check_clock(clock)
