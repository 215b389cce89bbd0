"""The measuring rules every benchmark follows, in one place.

- **Rounds.** At least :data:`MIN_ROUNDS` rounds; ``BENCH_ROUNDS`` may ask for
  more. A run with fewer (a smoke run) prints its table but never writes the
  page.
- **Interleaving.** Within a round every variant runs once, in an order
  rotated by the round's number (:func:`rotate`), so no variant always runs
  first, last, or on the largest table.
- **Ratios.** A ratio is taken within a round (same machine state) and the
  page shows the median of the per-round ratios with their min and max
  (:func:`ratio`), never a ratio of medians.
- **Load.** The one-minute load average is recorded at the start and the end
  of a run (:class:`Load`) and printed beside the figures.
- **Targets.** A benchmark with a target records it (:func:`record`) in
  ``benchmarks/results/NAME.json``; ``python -m benchmarks targets`` builds
  the page's "Targets at a glance" table from those files only, so the table
  says nothing no command measured.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypeVar

MIN_ROUNDS = 5
RESULTS = Path(__file__).resolve().parent / "results"

T = TypeVar("T")


def rounds(env: str = "BENCH_ROUNDS", default: int = MIN_ROUNDS) -> int:
    """The number of rounds asked for (``env``), ``default`` when unset."""
    return int(os.environ.get(env, str(default)))


def publishable(n_rounds: int) -> bool:
    """Whether a run of ``n_rounds`` may write the page (at least MIN_ROUNDS)."""
    return n_rounds >= MIN_ROUNDS


def rotate(variants: Sequence[T], round_index: int) -> list[T]:
    """``variants`` in the order round ``round_index`` runs them (rotated by one a round)."""
    if not variants:
        return []
    k = round_index % len(variants)
    return list(variants[k:]) + list(variants[:k])


def run_rounds(
    variants: Sequence[str],
    run_round: Callable[[list[str], int], Mapping[str, float]],
    n_rounds: int,
    *,
    progress: bool = True,
) -> list[dict[str, float]]:
    """Call ``run_round(order, i)`` for each round; each returns a figure per variant."""
    out: list[dict[str, float]] = []
    for i in range(n_rounds):
        order = rotate(variants, i)
        figures = dict(run_round(order, i))
        missing = set(variants) - set(figures)
        if missing:
            raise RuntimeError(f"round {i} measured no figure for {sorted(missing)}")
        out.append(figures)
        if progress:
            shown = ", ".join(f"{k} {figures[k]:.4g}" for k in variants)
            print(f"  round {i + 1}/{n_rounds} ({' > '.join(order)}): {shown}", flush=True)
    return out


@dataclass(frozen=True)
class Ratio:
    """The median of per-round ratios, with the smallest and largest."""

    median: float
    low: float
    high: float
    rounds: int

    def __str__(self) -> str:
        return f"{self.median:.2f} ({self.low:.2f}-{self.high:.2f})"


def ratio(
    per_round: Iterable[Mapping[str, float]],
    numerator: str,
    denominator: str,
) -> Ratio:
    """Median (min, max) over rounds of ``round[numerator] / round[denominator]``."""
    values = [r[numerator] / r[denominator] for r in per_round]
    if not values:
        raise ValueError("no rounds to take a ratio of")
    return Ratio(statistics.median(values), min(values), max(values), len(values))


def of_values(values: Sequence[float]) -> Ratio:
    """A :class:`Ratio` over already-computed per-round values."""
    return Ratio(statistics.median(values), min(values), max(values), len(values))


@dataclass
class Load:
    """The machine's one-minute load average at the start and end of a run."""

    start: float = field(default_factory=lambda: os.getloadavg()[0])
    end: float | None = None

    def stop(self) -> Load:
        """Record the end of the run."""
        self.end = os.getloadavg()[0]
        return self

    def __str__(self) -> str:
        end = self.end if self.end is not None else os.getloadavg()[0]
        return f"load average {self.start:.2f} at the start, {end:.2f} at the end"


@dataclass(frozen=True)
class Target:
    """One numeric target and what a run measured for it.

    ``bound`` is the limit, ``better`` is ``"lower"`` (the measured median
    must be <= bound) or ``"higher"`` (>= bound).
    """

    benchmark: str
    label: str
    bound: float
    better: str
    measured: Ratio
    note: str = ""

    @property
    def met(self) -> bool:
        """Whether the median meets the bound."""
        if self.better == "lower":
            return self.measured.median <= self.bound
        return self.measured.median >= self.bound

    def row(self) -> list[str]:
        sign = "<=" if self.better == "lower" else ">="
        verdict = "met" if self.met else "**missed**"
        return [
            self.label,
            f"{sign} {self.bound:.2f}",
            str(self.measured),
            verdict + (f": {self.note}" if self.note else ""),
        ]


def record(name: str, targets: Sequence[Target], load: Load, n_rounds: int) -> None:
    """Store ``targets`` as ``benchmarks/results/NAME.json`` (a publishable run only)."""
    if not publishable(n_rounds):
        print(f"({n_rounds} rounds: a smoke run, results not recorded)")
        return
    RESULTS.mkdir(exist_ok=True)
    payload = {
        "benchmark": name,
        "rounds": n_rounds,
        "load": str(load),
        "targets": [{**asdict(t), "measured": asdict(t.measured)} for t in targets],
    }
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2) + "\n")


def recorded_targets() -> list[tuple[Target, str]]:
    """Every recorded target with its run's load line, in file-name order."""
    out: list[tuple[Target, str]] = []
    for path in sorted(RESULTS.glob("*.json")):
        data = json.loads(path.read_text())
        for t in data["targets"]:
            measured = Ratio(**t.pop("measured"))
            out.append((Target(measured=measured, **t), data["load"]))
    return out
