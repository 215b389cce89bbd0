"""The kit's end of the fault points: count handler runs, crash where armed."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from inboxguard._core import faults
from inboxguard._core.faults import FaultPoint

__all__ = ["Crash", "Tap", "crash_at"]


class Crash(BaseException):
    """The worker dies here: raised at an armed fault point.

    A ``BaseException``, so handler code that catches ``Exception`` cannot
    swallow it, exactly as it could not stop ``kill -9``. ``point`` names the
    seam, ``key`` the command ID (or effect key) it was reached for.
    """

    def __init__(self, point: FaultPoint, key: str) -> None:
        super().__init__(f"crashed at {point} for {key!r}")
        self.point = point
        self.key = key


@dataclass
class _Rule:
    point: FaultPoint
    key: str | None
    left: int


class Tap:
    """The hook the kit arms: counts fresh claims per command ID, and raises
    :class:`Crash` at the points a case asked for (each rule a number of times)."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self.crashes: list[Crash] = []
        self._rules: list[_Rule] = []
        self._lock = threading.Lock()

    def crash_at(self, point: FaultPoint | str, key: str | None = None, times: int = 1) -> None:
        """Crash the next ``times`` workers that reach ``point`` (for ``key``, or any)."""
        with self._lock:
            self._rules.append(_Rule(FaultPoint(point), key, times))

    def clear(self) -> None:
        """Forget the crash rules not yet used."""
        with self._lock:
            self._rules.clear()

    def __call__(self, point: FaultPoint, key: str) -> None:
        with self._lock:
            if point is FaultPoint.HANDLER_RUNS:
                self.runs[key] += 1
            for rule in self._rules:
                if rule.left > 0 and rule.point is point and rule.key in (None, key):
                    rule.left -= 1
                    crash = Crash(point, key)
                    self.crashes.append(crash)
                    raise crash

    @contextmanager
    def armed(self) -> Iterator[Tap]:
        """Arm this tap for the block; put back whatever was armed before."""
        previous = faults.arm(self)
        try:
            yield self
        finally:
            faults.arm(previous)


@contextmanager
def crash_at(point: FaultPoint | str, key: str | None = None, times: int = 1) -> Iterator[Tap]:
    """Crash the next ``times`` workers that reach ``point`` (for ``key``, or
    any key) with :class:`Crash`, inside the block; yield the armed tap
    (``tap.crashes`` lists what was raised, ``tap.runs`` the handler runs)."""
    tap = Tap()
    tap.crash_at(point, key, times)
    with tap.armed():
        yield tap
