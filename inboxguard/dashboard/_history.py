"""The outbox over time: readings sampled while the dashboard runs, and the
geometry of the chart drawn from them (inline SVG, no script)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import datetime as dt

    from inboxguard.operations import Stats

__all__ = ["Chart", "History", "Sample", "chart"]


@dataclass(frozen=True, slots=True)
class Sample:
    """The outbox at one instant: backlog rows and the oldest unsent row's age."""

    at: dt.datetime
    backlog: int
    oldest_unsent_seconds: float


class History:
    """The last ``size`` samples, oldest first; a reading closer than
    ``spacing_seconds`` to the previous sample is not kept (page reloads)."""

    def __init__(self, size: int = 240, spacing_seconds: float = 1.0) -> None:
        self._samples: deque[Sample] = deque(maxlen=size)
        self._spacing = spacing_seconds
        self._lock = threading.Lock()

    def add(self, reading: Stats) -> None:
        """Keep the outbox part of a stats reading (nothing without an outbox)."""
        out = reading.outbox
        if out is None:
            return
        age = out.oldest_unsent_age.total_seconds() if out.oldest_unsent_age else 0.0
        sample = Sample(reading.at, out.backlog, max(age, 0.0))
        with self._lock:
            last = self._samples[-1] if self._samples else None
            if last is not None and (sample.at - last.at).total_seconds() < self._spacing:
                self._samples[-1] = sample
            else:
                self._samples.append(sample)

    def samples(self) -> list[Sample]:
        """A copy of the samples, oldest first."""
        with self._lock:
            return list(self._samples)


@dataclass(frozen=True, slots=True)
class Chart:
    """Polyline points (SVG user units) of the two series, their maxima, and
    the first and last sample times."""

    width: int
    height: int
    backlog_points: str
    age_points: str
    backlog_max: int
    age_max: float
    first: dt.datetime | None
    last: dt.datetime | None


def chart(samples: Sequence[Sample], width: int = 640, height: int = 160) -> Chart:
    """Scale both series to the plot, each against its own maximum."""
    if not samples:
        return Chart(width, height, "", "", 0, 0.0, None, None)
    start, end = samples[0].at, samples[-1].at
    span = max((end - start).total_seconds(), 1.0)
    backlog_max = max(s.backlog for s in samples)
    age_max = max(s.oldest_unsent_seconds for s in samples)

    def points(values: Sequence[float], top: float) -> str:
        out = []
        for sample, value in zip(samples, values, strict=True):
            x = (sample.at - start).total_seconds() / span * width
            y = height - (value / top * height if top else 0.0)
            out.append(f"{x:.1f},{y:.1f}")
        return " ".join(out)

    return Chart(
        width,
        height,
        points([s.backlog for s in samples], backlog_max),
        points([s.oldest_unsent_seconds for s in samples], age_max),
        backlog_max,
        age_max,
        start,
        end,
    )
