"""Waiting between polls: a PostgreSQL LISTEN wake-up that survives losing its
connection."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from sqlalchemy.engine import Engine

__all__ = ["PgListener", "WakeUp"]

logger = logging.getLogger("inboxguard.outbox")
#: Longest single wait, so a stop request is noticed promptly.
_SLICE = 0.2
#: First and longest wait before opening a lost LISTEN connection again (seconds).
_RECONNECT_FIRST = 0.5
_RECONNECT_CAP = 30.0


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


class WakeUp:
    """Waits between passes: on LISTEN notifications while the listening
    connection works, by polling while it does not.

    A listening connection that fails (a database restart, a failover, a
    killed backend) is closed and opened again after a backoff that doubles
    from half a second up to 30 seconds; until then the dispatcher polls.
    After a reopen the wait ends at once, so rows committed while nobody
    listened are claimed without waiting for the poll interval.
    """

    def __init__(self, engine: Engine, listen: str) -> None:
        self._engine = engine
        self._listen = listen
        self._listener: PgListener | None = None
        self._delay = _RECONNECT_FIRST
        self._next_open = 0.0
        self._polling_only = False  # the driver cannot LISTEN at all

    @property
    def listening(self) -> bool:
        """True while a LISTEN connection is open."""
        return self._listener is not None

    @property
    def listener(self) -> PgListener | None:
        """The open LISTEN connection, or None."""
        return self._listener

    def start(self) -> None:
        """Open the LISTEN connection before the first pass (on failure the
        dispatcher polls and retries later)."""
        self._reopen()

    def wait(self, timeout: float, stop: threading.Event) -> None:
        """Wait up to ``timeout`` seconds, less when a notification arrives,
        a stop is requested or a lost connection was opened again."""
        if self._listener is None and not self._polling_only and self._reopen():
            return
        if self._listener is None:
            left = max(self._next_open - time.monotonic(), 0.0)
            stop.wait(timeout if self._polling_only else min(timeout, max(left, _SLICE)))
            return
        try:
            self._listener.wait(timeout, stop)
        except Exception:  # the connection is gone: poll until it is back
            logger.warning(
                "the outbox LISTEN connection failed; polling until it is open again",
                exc_info=True,
            )
            self.close()
            self._next_open = time.monotonic() + self._delay

    def _reopen(self) -> bool:
        """Open the LISTEN connection when its backoff is over; True if it opened."""
        if time.monotonic() < self._next_open:
            return False
        try:
            listener = PgListener.open(self._engine, self._listen)
        except Exception:
            logger.warning(
                "opening the outbox LISTEN connection failed; retrying in %.1fs, polling meanwhile",
                self._delay,
                exc_info=True,
            )
            self._next_open = time.monotonic() + self._delay
            self._delay = min(self._delay * 2, _RECONNECT_CAP)
            return False
        if listener is None:
            self._polling_only = True
            return False
        first = self._next_open == 0.0
        self._listener, self._delay = listener, _RECONNECT_FIRST
        return not first  # after a loss, claim what was committed meanwhile

    def close(self) -> None:
        """Close the LISTEN connection, if open."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None
