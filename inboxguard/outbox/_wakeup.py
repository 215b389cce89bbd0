"""Waiting between polls: a PostgreSQL LISTEN wake-up, and the lock that keeps
a SQLite database to one dispatcher."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from sqlalchemy.engine import Engine

from inboxguard.errors import ConfigurationError

__all__ = ["PgListener", "SqliteDispatcherLock"]

logger = logging.getLogger("inboxguard.outbox")
#: Longest single wait, so a stop request is noticed promptly.
_SLICE = 0.2


class PgListener:
    """Holds a connection that LISTENs on the outbox's channel.

    Only psycopg 3 connections are supported; :meth:`open` returns None for
    any other driver, and the dispatcher keeps polling.
    """

    def __init__(self, raw: Any, driver: Any) -> None:
        self._raw = raw
        self._driver = driver

    @classmethod
    def open(cls, engine: Engine, listen: str) -> PgListener | None:
        """Run the ``listen`` statement (``LISTEN "channel"``, from the outbox's
        statements) on a connection of its own; None when the driver cannot
        (not psycopg 3)."""
        raw = engine.raw_connection()
        driver: Any = raw.driver_connection
        if (
            driver is None
            or not hasattr(driver, "notifies")
            or not hasattr(driver, "set_autocommit")
        ):
            raw.close()
            logger.warning(
                "wake-up needs the psycopg 3 driver; %s found, polling instead",
                type(driver).__module__,
            )
            return None
        driver.set_autocommit(True)
        driver.execute(listen)
        return cls(raw, driver)

    def wait(self, timeout: float, stop: threading.Event) -> bool:
        """Wait up to ``timeout`` seconds for a notification; True if one came."""
        deadline = time.monotonic() + timeout
        while not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if any(True for _ in self._driver.notifies(timeout=min(left, _SLICE), stop_after=1)):
                # Drain what else arrived: one claim serves them all.
                for _ in self._driver.notifies(timeout=0):
                    pass
                return True
        return False

    def close(self) -> None:
        """Close the listening connection (it is not returned to the pool)."""
        try:
            self._raw.invalidate()
        except Exception:  # pragma: no cover - closing a broken connection
            logger.debug("closing the LISTEN connection failed", exc_info=True)


class SqliteDispatcherLock:
    """An advisory lock that admits one dispatcher per SQLite database.

    A file database is locked with ``flock`` on ``<file>.dispatcher.lock``,
    which also excludes dispatchers in other processes; an in-memory database
    is locked within this process.
    """

    _memory: set[str] = set()  # noqa: RUF012 - deliberately process-wide
    _guard = threading.Lock()

    def __init__(self, database: str | None) -> None:
        self.database = database or ":memory:"
        self._fd: int | None = None
        self._held = False

    def acquire(self) -> None:
        """Take the lock or fail.

        Raises:
            ConfigurationError: another dispatcher holds it.
        """
        if self._held:
            return
        if self.database == ":memory:" or self.database.startswith("file::memory:"):
            with self._guard:
                if self.database in self._memory:
                    raise self._busy()
                self._memory.add(self.database)
        else:
            import fcntl  # noqa: PLC0415 - POSIX only, and only for SQLite

            fd = os.open(f"{self.database}.dispatcher.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise self._busy() from None
            self._fd = fd
        self._held = True

    def release(self) -> None:
        """Give the lock back (idempotent)."""
        if not self._held:
            return
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
        else:
            with self._guard:
                self._memory.discard(self.database)
        self._held = False

    def _busy(self) -> ConfigurationError:
        msg = (
            f"another outbox dispatcher is already running on the SQLite database"
            f" {self.database!r}; SQLite has no FOR UPDATE SKIP LOCKED, so it runs one"
            " dispatcher: stop the other one, or use PostgreSQL or MariaDB to run several"
        )
        return ConfigurationError(msg)
