"""A clock a test moves by hand, shared by the inbox, the ledger and the provider."""

from __future__ import annotations

import datetime as dt
import threading

from inboxguard._core.clock import as_utc

__all__ = ["ManualClock"]

#: Where a :class:`ManualClock` starts unless told otherwise.
DEFAULT_START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class ManualClock:
    """A controllable clock: it stands still until :meth:`advance` or :meth:`set`.

    Pass the same instance as ``clock=`` to the inbox, the ledger and the
    :class:`~inboxguard.testing.FakeProvider`, so a lease, a retention horizon
    and a provider's idempotency window all expire at the same moment.
    Always returns an aware datetime in UTC; safe to move from any thread.
    """

    def __init__(self, start: dt.datetime = DEFAULT_START) -> None:
        self._now = as_utc(start, "ManualClock start")
        self._lock = threading.Lock()

    def __call__(self) -> dt.datetime:
        return self._now

    def __repr__(self) -> str:
        return f"<ManualClock {self._now.isoformat()}>"

    @property
    def now(self) -> dt.datetime:
        """The current time of this clock."""
        return self._now

    def advance(self, delta: dt.timedelta | None = None, /, **parts: float) -> dt.datetime:
        """Move forward by ``delta`` or by ``timedelta(**parts)`` (``minutes=5``);
        return the new time.

        Raises:
            ValueError: neither or both given, or a negative step (time never
                runs backwards here; use :meth:`set` on purpose).
        """
        if (delta is None) == (not parts):
            msg = "advance() takes a timedelta or keyword parts (advance(minutes=5)), not both"
            raise ValueError(msg)
        step = delta if delta is not None else dt.timedelta(**parts)
        if not isinstance(step, dt.timedelta) or step < dt.timedelta(0):
            msg = f"advance() needs a non-negative timedelta, got {step!r}"
            raise ValueError(msg)
        with self._lock:
            self._now += step
            return self._now

    def set(self, when: dt.datetime) -> None:
        """Jump to ``when`` (an aware datetime), forwards or backwards."""
        value = as_utc(when, "ManualClock.set(when)")
        with self._lock:
            self._now = value
