"""The measuring rules every benchmark follows, in one place.

- **Rounds.** At least :data:`MIN_ROUNDS` rounds; ``BENCH_ROUNDS`` may ask for
  more. A run with fewer (a smoke run) prints its table but never writes the
  page.
- **Interleaving.** Within a round every variant runs once, in an order
  rotated by the round's number (:func:`rotate`), so no variant always runs
  first, last, or on the largest table. A benchmark that alternates its
  variants message by message or chunk by chunk takes a fresh order for each
  (:func:`shuffled_orders`): a rotation keeps every variant's neighbours, and
  a variant always run right after the same other one pays for what that one
  leaves the server doing.
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

import contextlib
import datetime as dt
import json
import os
import random
import statistics
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

MIN_ROUNDS = 5
RESULTS = Path(__file__).resolve().parent / "results"

T = TypeVar("T")


def rounds(env: str = "BENCH_ROUNDS", default: int = MIN_ROUNDS) -> int:
    """The number of rounds asked for (``env``), ``default`` when unset.

    A value that is not a whole number of at least one is refused, naming the
    variable (``BENCH_ROUNDS=1`` asks for a smoke run, which never publishes).
    """
    raw = os.environ.get(env, str(default)).strip()
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(
            f"{env}={raw!r}: give a whole number of rounds, at least 1"
            f" ({MIN_ROUNDS} or more to publish; 1 for a smoke run)"
        )
    return value


def publishable(n_rounds: int) -> bool:
    """Whether a run of ``n_rounds`` may write the page (at least MIN_ROUNDS)."""
    return n_rounds >= MIN_ROUNDS


def rotate(variants: Sequence[T], round_index: int) -> list[T]:
    """``variants`` in the order round ``round_index`` runs them (rotated by one a round)."""
    if not variants:
        return []
    k = round_index % len(variants)
    return list(variants[k:]) + list(variants[:k])


def shuffled_orders(variants: Sequence[T], count: int, round_index: int) -> list[list[T]]:
    """``count`` orders of ``variants``, each shuffled afresh, the same for the
    same round (seeded by ``round_index``): one per message or chunk."""
    shuffle = random.Random(round_index).shuffle
    orders: list[list[T]] = []
    for _ in range(count):
        order = list(variants)
        shuffle(order)
        orders.append(order)
    return orders


def run_rounds(
    variants: Sequence[str],
    run_round: Callable[[list[str], int], Mapping[str, float]],
    n_rounds: int,
    *,
    progress: bool = True,
) -> list[dict[str, float]]:
    """Call ``run_round(order, i)`` for each round; each returns a figure per variant."""
    if len(set(variants)) != len(variants):
        raise ValueError(f"variants must be distinct, got {list(variants)}")
    out: list[dict[str, float]] = []
    for i in range(n_rounds):
        order = rotate(variants, i)
        figures = {k: float(v) for k, v in run_round(order, i).items()}
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
        return self.format()

    def format(self, digits: int = 2) -> str:
        """``median (low-high)`` with ``digits`` decimals."""
        return f"{self.median:.{digits}f} ({self.low:.{digits}f}-{self.high:.{digits}f})"


def ratio(
    per_round: Iterable[Mapping[str, float]],
    numerator: str,
    denominator: str,
) -> Ratio:
    """Median (min, max) over rounds of ``round[numerator] / round[denominator]``."""
    return of_values([r[numerator] / r[denominator] for r in per_round])


def of_values(values: Sequence[float]) -> Ratio:
    """A :class:`Ratio` over already-computed per-round values."""
    if not values:
        raise ValueError("no rounds to take a ratio of")
    return Ratio(statistics.median(values), min(values), max(values), len(values))


def median(per_round: Iterable[Mapping[str, float]], key: str) -> float:
    """The median over rounds of one variant's figure (a rate or a time, not a ratio)."""
    values = [r[key] for r in per_round]
    if not values:
        raise ValueError(f"no rounds measured {key!r}")
    return statistics.median(values)


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
    must be <= bound) or ``"higher"`` (>= bound). ``floor`` is, where the
    benchmark times one, the same ratio taken in the same run with the
    evidence row alone in the guard's place (issue 37: no guard that writes
    the evidence the guarantees need can cost less), and ``floor_variant``
    names what was timed; a target the floor itself misses is out of reach
    by design, and the verdict says so.
    """

    benchmark: str
    label: str
    bound: float
    better: str
    measured: Ratio
    note: str = ""
    floor: Ratio | None = None
    floor_variant: str = ""

    def __post_init__(self) -> None:
        if self.better not in ("lower", "higher"):
            raise ValueError(
                f"Target {self.label!r}: better={self.better!r}; give 'lower' (the median"
                " must be <= bound) or 'higher' (>= bound)"
            )

    def _meets(self, value: float) -> bool:
        return value <= self.bound if self.better == "lower" else value >= self.bound

    @property
    def met(self) -> bool:
        """Whether the median meets the bound."""
        return self._meets(self.measured.median)

    @property
    def out_of_reach(self) -> bool:
        """Whether the floor (the evidence row alone, same ratio, or the bound another benchmark
        measures for it) misses the bound too."""
        return self.floor is not None and not self._meets(self.floor.median)

    def verdict(self) -> str:
        """``met``, ``**missed**``, or ``**missed**, out of reach at the floor``."""
        if self.met:
            return "met"
        if self.out_of_reach:
            return "**missed**, out of reach: its floor (next column) misses it too"
        return "**missed**"

    def row(self) -> list[str]:
        sign = "<=" if self.better == "lower" else ">="
        floor = "-" if self.floor is None else f"{self.floor} ({self.floor_variant})"
        return [
            self.label,
            f"{sign} {self.bound:.2f}",
            str(self.measured),
            floor,
            self.verdict() + (f": {self.note}" if self.note else ""),
        ]


def record(
    name: str,
    targets: Sequence[Target],
    load: Load,
    n_rounds: int,
    *,
    command: str | None = None,
) -> bool:
    """Store ``targets`` as ``benchmarks/results/NAME.json`` (a publishable run only).

    Returns whether the file was written. Every target must have been measured
    over the run's ``n_rounds`` rounds: a figure from fewer rounds is refused,
    so a smoke-run figure cannot reach the table through a publishable run.
    """
    if not publishable(n_rounds):
        print(f"({n_rounds} rounds: a smoke run, results not recorded)")
        return False
    short = [t.label for t in targets if t.measured.rounds < MIN_ROUNDS]
    if short:
        raise ValueError(
            f"{name}: {short} measured over fewer than {MIN_ROUNDS} rounds; measure every"
            " target over the run's rounds"
        )
    RESULTS.mkdir(exist_ok=True)
    payload = {
        "benchmark": name,
        "rounds": n_rounds,
        "load": str(load),
        "command": command or f"python -m benchmarks {name}",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"),
        "targets": [asdict(t) for t in targets],
    }
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2) + "\n")
    return True


@dataclass(frozen=True)
class Recorded:
    """One results file: the run's facts and its targets."""

    benchmark: str
    rounds: int
    load: str
    command: str
    date: str
    targets: list[Target]


def _target(data: dict[str, Any]) -> Target:
    floor = data.pop("floor", None)
    return Target(
        measured=Ratio(**data.pop("measured")),
        floor=None if floor is None else Ratio(**floor),
        **data,
    )


def recorded_runs() -> list[Recorded]:
    """Every results file, in file-name order; a malformed one is named in the error."""
    out: list[Recorded] = []
    for path in sorted(RESULTS.glob("*.json")):
        try:
            data = json.loads(path.read_text())
            targets = [_target(t) for t in data["targets"]]
            out.append(
                Recorded(
                    benchmark=data["benchmark"],
                    rounds=int(data["rounds"]),
                    load=data["load"],
                    command=data.get("command", f"python -m benchmarks {data['benchmark']}"),
                    date=data.get("date", ""),
                    targets=targets,
                )
            )
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(
                f"{path}: not a results file ({error}); rerun its benchmark to rewrite it"
            ) from error
    return out


def recorded_targets() -> list[tuple[Target, str]]:
    """Every recorded target with its run's load line, in file-name order."""
    return [(t, run.load) for run in recorded_runs() for t in run.targets]


ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def source_tree(ref_or_dir: str | Path) -> Iterator[Path]:
    """A directory holding the ``inboxguard`` package of ``ref_or_dir``.

    A directory is used as it is (a ``git worktree``, say); anything else is a
    git revision of this repository, whose ``inboxguard/`` is extracted into a
    temporary directory for the run (no worktree is left behind). Put the
    result first on a child process's ``PYTHONPATH`` to run that code.
    """
    path = Path(ref_or_dir)
    if path.is_dir():
        if not (path / "inboxguard" / "__init__.py").exists():
            raise ValueError(f"{path}: holds no inboxguard package; give a checkout or a git ref")
        yield path.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="inboxguard-") as tmp:
        try:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", str(ref_or_dir), "inboxguard"],
                capture_output=True,
                check=True,
            ).stdout
        except subprocess.CalledProcessError as error:
            raise ValueError(
                f"{ref_or_dir!r} is neither a directory nor a git revision of {ROOT}:"
                f" {error.stderr.decode().strip()}"
            ) from error
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp)
