"""The settings an :class:`inboxguard.Inbox` is built with, checked before use."""

from __future__ import annotations

import datetime as dt
import re

from sqlalchemy.engine import Engine

from inboxguard.errors import ConfigurationError

__all__ = ["DEFAULT_LOCK_TIMEOUT", "check_settings"]

_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}\Z")
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
    if not isinstance(engine, Engine):
        msg = f"engine must be a sqlalchemy Engine, got {type(engine).__name__}"
        if hasattr(engine, "sync_engine"):
            msg += (
                "; pass a sync Engine on the same database (it serves schema creation,"
                " lookups and quarantine reads); guard_async() takes the AsyncSession"
                " and writes through its own AsyncEngine"
            )
        raise ConfigurationError(msg)
    if not isinstance(table_prefix, str) or not _PREFIX.match(table_prefix):
        msg = f"table_prefix {table_prefix!r} must match [A-Za-z_][A-Za-z0-9_]{{0,39}}"
        raise ConfigurationError(msg)
    if lock_timeout is not None and (
        not isinstance(lock_timeout, dt.timedelta) or lock_timeout < dt.timedelta(0)
    ):
        msg = f"lock_timeout must be a non-negative timedelta or None, got {lock_timeout!r}"
        raise ConfigurationError(msg)
    if clock is not None and not callable(clock):
        msg = f"clock must be a zero-argument callable, got {clock!r}"
        raise ConfigurationError(msg)
