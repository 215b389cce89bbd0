"""The database server's clock: the one time every worker on a database shares.

Leases, the outbox's creation and due times and the ledger's idempotency
windows compare times written by one worker with times read by another. With
each worker's own clock, a worker ten seconds fast records a ``first_sent_at``
ten seconds late, and a correct worker then believes a provider's window is
open after the provider has forgotten the key. :class:`ServerClock` reads the
server's time instead.

Reading it on every call would add a round trip to every step, so the clock
reads the server once, then advances with the local *monotonic* clock (which
no NTP step or wrong wall clock moves), and reads the server again every
``refresh`` seconds. The time it returns is off from the server's by at most
half the round trip of the last reading plus the monotonic clock's drift
since then (parts per million: well under a millisecond a minute).
"""

from __future__ import annotations

import datetime as dt
import threading
import time

from sqlalchemy import text
from sqlalchemy.engine import Engine

from inboxguard._core.clock import utc_now

__all__ = ["ServerClock"]

#: How the server's current time is read, by dialect (UTC, microseconds).
_QUERIES = {
    "postgresql": "SELECT clock_timestamp()",
    "mysql": "SELECT UTC_TIMESTAMP(6)",
    "mariadb": "SELECT UTC_TIMESTAMP(6)",
}


class ServerClock:
    """A clock that tells the database server's time (a :data:`Clock`).

    SQLite has no server: the database is a file on this machine, so its
    clock is this machine's (``utc_now``).

    Args:
        engine: the database whose server keeps the time.
        refresh: seconds between two readings of the server's time.
    """

    def __init__(self, engine: Engine, *, refresh: float = 60.0) -> None:
        self.engine = engine
        self.refresh = refresh
        self._query = _QUERIES.get(engine.dialect.name)
        self._lock = threading.Lock()
        self._base: tuple[float, dt.datetime] | None = None
        self._last = dt.datetime.min.replace(tzinfo=dt.UTC)

    def __repr__(self) -> str:
        """Name the database whose clock this is."""
        return f"<ServerClock {self.engine.dialect.name}>"

    def __call__(self) -> dt.datetime:
        """The server's current time, in UTC; never earlier than a time it
        returned before (a new reading may be a little behind the last)."""
        if self._query is None:
            return utc_now()
        base = self._base
        mono = time.monotonic()
        if base is None or mono - base[0] >= self.refresh:
            base = self._read()
            mono = time.monotonic()
        now = max(self._last, base[1] + dt.timedelta(seconds=mono - base[0]))
        self._last = now
        return now

    def _read(self) -> tuple[float, dt.datetime]:
        """Read the server's time; pair it with the monotonic mid-point of the read."""
        assert self._query is not None
        with self._lock:
            with self.engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")  # connected and warm: time one round trip only
                before = time.monotonic()
                value = conn.execute(text(self._query)).scalar_one()
                after = time.monotonic()
            if value.tzinfo is None:  # MariaDB/MySQL: UTC_TIMESTAMP is naive UTC
                value = value.replace(tzinfo=dt.UTC)
            self._base = ((before + after) / 2, value.astimezone(dt.UTC))
            return self._base
