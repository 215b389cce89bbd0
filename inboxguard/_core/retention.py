"""Retention that follows the replay windows.

Deduplication evidence is worth keeping exactly as long as some path can bring
the same command back: broker redelivery, a retry schedule, a dead-letter
replay, a backfill, a dispute. A :class:`RetentionPolicy` names those windows;
its horizon is the longest of them plus a safety margin, and every inbox row is
kept until ``processed_at + horizon``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Final

from inboxguard.errors import ConfigurationError, RetentionMisalignedError

__all__ = [
    "DEFAULT_MARGIN",
    "MAX_HORIZON",
    "MIN_CLOCK_SKEW",
    "UNBOUNDED",
    "CheckedWindow",
    "RetentionPolicy",
    "Window",
    "WindowRow",
    "format_duration",
]

#: Safety margin added to the longest window when none is given: clock skew
#: between producers and consumers, and purge lag, live inside it.
DEFAULT_MARGIN: Final = dt.timedelta(days=1)
#: Longest horizon accepted: ``now + horizon`` must stay a datetime for
#: centuries (the largest datetime is in the year 9999).
MAX_HORIZON: Final = dt.timedelta(days=1000 * 366)
#: A producer's clock may run this far ahead even with no margin.
MIN_CLOCK_SKEW: Final = dt.timedelta(minutes=1)


#: Stands in for "no bound" where a length must be compared with a horizon;
#: longer than any horizon (:data:`MAX_HORIZON`).
UNBOUNDED: Final = dt.timedelta(days=999_999_999)


@dataclass(frozen=True, slots=True)
class Window:
    """One replay window an adapter discovered: its name, its length (None:
    unbounded, e.g. a retry schedule with no maximum) and where it was read.

    Every adapter, the guarantee tables and the CLI use this one type."""

    name: str
    length: dt.timedelta | None
    source: str

    @property
    def bound(self) -> dt.timedelta:
        """The length to compare with a horizon (:data:`UNBOUNDED` for None)."""
        return UNBOUNDED if self.length is None else self.length


@dataclass(frozen=True, slots=True)
class CheckedWindow:
    """A :class:`Window` found inside the horizon of the inbox it was checked
    against (what a worker's start-up log reports)."""

    window: Window
    horizon: dt.timedelta

    @property
    def share(self) -> float:
        """The part of the horizon the window takes (the largest is the closest)."""
        return self.window.bound.total_seconds() / max(self.horizon.total_seconds(), 1e-9)


@dataclass(frozen=True, slots=True)
class WindowRow:
    """One line of :meth:`RetentionPolicy.explain`: a window and where it came from."""

    window: str
    length: dt.timedelta
    source: str


class RetentionPolicy:
    """How long deduplication evidence is kept, derived from the replay windows.

    ``horizon`` is the longest window plus ``margin``; evidence is never
    purged before it. ``result_ttl`` (optional, not longer than the horizon)
    drops stored results earlier while keeping the evidence that makes a
    redelivery a duplicate.

    Raises:
        ConfigurationError: no window, a window that is not a positive
            ``timedelta``, a negative margin, a horizon longer than
            :data:`MAX_HORIZON` (a datetime plus it could overflow), or a
            ``result_ttl`` beyond the horizon.
    """

    __slots__ = ("_reported", "_sources", "margin", "result_ttl", "windows")

    def __init__(
        self,
        *,
        margin: dt.timedelta = DEFAULT_MARGIN,
        result_ttl: dt.timedelta | None = None,
        **windows: dt.timedelta,
    ) -> None:
        if not windows:
            msg = (
                "RetentionPolicy needs at least one replay window, e.g."
                " RetentionPolicy(dead_letter_replay=timedelta(days=30))"
            )
            raise ConfigurationError(msg)
        for name, length in windows.items():
            _require_duration(f"window {name!r}", length, positive=True)
        _require_duration("margin", margin, positive=False)
        self.windows: dict[str, dt.timedelta] = dict(windows)
        self.margin = margin
        self._sources = dict.fromkeys(windows, "declared")
        self._reported: dict[tuple[str, str], dt.timedelta] = {}
        _require_representable(self.windows, margin)
        self.result_ttl = result_ttl
        if result_ttl is not None:
            _require_duration("result_ttl", result_ttl, positive=True)
            if result_ttl > self.horizon:
                msg = (
                    f"result_ttl {format_duration(result_ttl)} is longer than the horizon"
                    f" {format_duration(self.horizon)}; results cannot outlive their evidence"
                )
                raise ConfigurationError(msg)

    @classmethod
    def coerce(cls, value: RetentionPolicy | dt.timedelta) -> RetentionPolicy:
        """Return ``value`` as a policy; a bare ``timedelta`` is one window, no margin."""
        if isinstance(value, RetentionPolicy):
            return value
        if isinstance(value, dt.timedelta):
            return cls(retention=value, margin=dt.timedelta(0))
        msg = (
            f"retention must be a RetentionPolicy or a timedelta, got {type(value).__name__};"
            " e.g. retention=timedelta(days=30)"
        )
        raise ConfigurationError(msg)

    @property
    def horizon(self) -> dt.timedelta:
        """How long evidence is kept: the longest window plus the margin."""
        return max(self.windows.values()) + self.margin

    @property
    def max_message_age(self) -> dt.timedelta:
        """The oldest a message may be (by its ``sent_at``) and still be judged:
        the horizon minus the margin, which absorbs clock skew."""
        return self.horizon - self.margin

    @property
    def max_clock_skew(self) -> dt.timedelta:
        """How far in the future a ``sent_at`` may be: the margin (at least
        :data:`MIN_CLOCK_SKEW`). Within it, a producer's clock running ahead
        still leaves the message's real age inside the horizon."""
        return max(self.margin, MIN_CLOCK_SKEW)

    def explain(self) -> list[WindowRow]:
        """Rows a person can read: each declared window, each window reported
        through :meth:`check` (with the source that found it), the margin, the
        resulting horizon and the result TTL."""
        rows = [
            WindowRow(name, length, self._sources[name])
            for name, length in sorted(self.windows.items(), key=lambda kv: (-kv[1], kv[0]))
        ]
        rows += [
            WindowRow(name, length, source)
            for (source, name), length in sorted(
                self._reported.items(), key=lambda kv: (-kv[1], kv[0])
            )
        ]
        rows.append(WindowRow("margin", self.margin, "safety margin"))
        rows.append(WindowRow("horizon", self.horizon, "longest declared window + margin"))
        if self.result_ttl is not None:
            rows.append(WindowRow("result_ttl", self.result_ttl, "stored results dropped after"))
        return rows

    def check(self, source: str = "declared", **windows: dt.timedelta) -> None:
        """Record the windows found at ``source`` and fail unless each fits
        inside the horizon.

        This is the hook adapters call at worker start with the windows they
        discover (``source`` e.g. ``"celery: broker visibility_timeout"``): the
        error names it, and :meth:`explain` lists every reported window with
        its source. Reporting the same (source, name) again replaces it.

        Raises:
            RetentionMisalignedError: the first window longer than the horizon.
        """
        horizon = self.horizon
        for name, length in windows.items():
            _require_duration(f"window {name!r}", length, positive=False)
        for name, length in windows.items():
            self._reported[(source, name)] = length
        for name, length in windows.items():
            if length > horizon:
                msg = (
                    f"replay window {name!r} ({source}) is {format_duration(length)} but the"
                    f" inbox keeps evidence for {format_duration(horizon)}: a replay inside"
                    " that window could be processed twice; add it to the RetentionPolicy"
                    f" (e.g. {name}=timedelta(seconds={int(length.total_seconds())}))"
                    " or shorten the window"
                )
                raise RetentionMisalignedError(msg, window=name, length=length, horizon=horizon)

    def __repr__(self) -> str:
        """Show the windows, margin and result TTL."""
        inner = ", ".join(f"{k}={format_duration(v)}" for k, v in self.windows.items())
        ttl = f", result_ttl={format_duration(self.result_ttl)}" if self.result_ttl else ""
        return f"RetentionPolicy({inner}, margin={format_duration(self.margin)}{ttl})"


def _require_duration(name: str, value: object, *, positive: bool) -> None:
    if not isinstance(value, dt.timedelta):
        msg = f"{name} must be a datetime.timedelta, got {type(value).__name__} {value!r}"
        raise ConfigurationError(msg)
    if value < dt.timedelta(0) or (positive and not value):
        msg = f"{name} must be {'positive' if positive else 'zero or more'}, got {value}"
        raise ConfigurationError(msg)


def _require_representable(windows: dict[str, dt.timedelta], margin: dt.timedelta) -> None:
    name, longest = max(windows.items(), key=lambda kv: kv[1])
    if longest <= MAX_HORIZON and margin <= MAX_HORIZON - longest:
        return
    msg = (
        f"window {name!r} ({longest.days} days) plus the margin ({margin.days} days) is"
        f" longer than {MAX_HORIZON.days} days: expiry times (now + horizon) would"
        " overflow a datetime; to keep evidence for ever, never purge instead"
    )
    raise ConfigurationError(msg)


def format_duration(value: dt.timedelta) -> str:
    """Return a short human form such as ``30d``, ``12h``, ``1d6h`` or ``90s``."""
    total = int(value.total_seconds())
    if total == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, total = divmod(total, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
