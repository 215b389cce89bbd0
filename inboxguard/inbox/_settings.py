"""The settings an :class:`inboxguard.Inbox` is built with, checked before use."""

from __future__ import annotations

import datetime as dt
import logging

from sqlalchemy.engine import Engine

from inboxguard._core.checks import check_clock, check_table_prefix
from inboxguard.errors import ConfigurationError
from inboxguard.sql.connection import check_engine, shared_pool_problem

__all__ = ["DEFAULT_LOCK_TIMEOUT", "check_settings", "check_sync_driver", "warn_about_pool"]

logger = logging.getLogger("inboxguard")

#: Default bound on waiting for another transaction's claim.
DEFAULT_LOCK_TIMEOUT = dt.timedelta(seconds=5)


def check_settings(
    engine: object, table_prefix: object, lock_timeout: object, clock: object
) -> None:
    """Refuse settings that cannot keep the guarantees, naming the fix.

    Raises:
        ConfigurationError: an async engine (or any non-Engine, or a sync
            Engine on an async driver), a bad table
            prefix, a negative or non-timedelta lock timeout, a clock that
            is not callable.
    """
    sync = check_engine(
        engine,
        async_hint=(
            "; pass a sync Engine on the same database (it serves schema creation,"
            " lookups and quarantine reads); guard_async() takes the AsyncSession"
            " and writes through its own AsyncEngine"
        ),
    )
    check_sync_driver(sync)
    check_table_prefix(table_prefix)
    if lock_timeout is not None and (
        not isinstance(lock_timeout, dt.timedelta) or lock_timeout < dt.timedelta(0)
    ):
        msg = f"lock_timeout must be a non-negative timedelta or None, got {lock_timeout!r}"
        raise ConfigurationError(msg)
    check_clock(clock)


def check_sync_driver(engine: Engine) -> None:
    """Refuse a sync ``Engine`` on an async driver (``AsyncEngine.sync_engine``):
    its synchronous calls (``lookup()``, ``create_schema()``, quarantine
    writes) would fail with SQLAlchemy's ``MissingGreenlet``.

    Raises:
        ConfigurationError: the engine's dialect is an async driver.
    """
    if not getattr(engine.dialect, "is_async", False):
        return
    msg = (
        f"engine uses the async driver {engine.dialect.driver!r} (is it an"
        " AsyncEngine's .sync_engine?); its synchronous calls such as lookup() would"
        " fail outside a greenlet. Pass Inbox a separate sync Engine on the same"
        " database with a sync driver, e.g. create_engine('postgresql+psycopg://...')"
        " beside create_async_engine('postgresql+asyncpg://...'), or 'sqlite://...'"
        " beside 'sqlite+aiosqlite://...'; guard_async() still takes the AsyncSession"
    )
    raise ConfigurationError(msg)


def warn_about_pool(engine: Engine) -> None:
    """Warn, once per inbox, when the engine's pool hands out the caller's own
    connection: quarantine records are then logged at ERROR, never written
    (a write on the caller's connection would commit the caller's changes)."""
    problem = shared_pool_problem(engine.pool)
    if problem is not None:
        logger.warning(
            "%s; quarantine records of this inbox will be logged at ERROR, not written."
            " Use a pool with connections of their own (QueuePool, NullPool; for"
            " SQLite, a database file) to keep them in the quarantine table",
            problem,
        )
