"""Build the "Targets at a glance" section of docs/benchmarks.md.

The table is made only from ``benchmarks/results/*.json``, which each
benchmark with a target writes at the end of a publishable run (see
:mod:`benchmarks._harness`). A target no command has measured is not shown.
Run with ``python -m benchmarks targets`` (``make bench`` runs it last).
"""

from __future__ import annotations

import dataclasses

from benchmarks._harness import MIN_ROUNDS, Recorded, Target, recorded_runs
from benchmarks._report import table, write_section

HEADER = [
    "benchmark",
    "target",
    "bound",
    "measured median (min-max)",
    "the evidence row alone, same ratio, same run",
    "verdict",
    "run",
]


#: Targets whose floor another benchmark measures: (benchmark, label prefix) ->
#: the benchmark whose first recorded target is that floor. The guard against
#: the evidence row has none in its own run (the row is its denominator); the
#: candidates benchmark times the guard's database side with no inboxguard
#: Python, the least that ratio can be.
FLOORS_FROM = {("inbox", "guard / evidence row"): "candidates"}


def _with_floor(target: Target, runs: dict[str, Recorded]) -> Target:
    for (benchmark, prefix), source in FLOORS_FROM.items():
        found = runs.get(source)
        if target.benchmark == benchmark and target.label.startswith(prefix) and found:
            return dataclasses.replace(
                target,
                floor=found.targets[0].measured,
                floor_variant=f"`{source}`: the guard's database side, no inboxguard Python",
            )
    return target


def body() -> str | None:
    """The section's text, or None when no benchmark has recorded a target."""
    rows = []
    recorded = recorded_runs()
    runs = {run.benchmark: run for run in recorded}
    for run in recorded:
        when = f"{run.date}, {run.rounds} rounds, {run.load}, `{run.command}`"
        for target in run.targets:
            rows.append([f"`{run.benchmark}`", *_with_floor(target, runs).row(), when])
    if not rows:
        return None
    return (
        "Each row is read from `benchmarks/results/NAME.json`, written by the named"
        f" benchmark at the end of its last publishable run ({MIN_ROUNDS} rounds or more):"
        " the median of the per-round ratios, with the smallest and largest round. A miss"
        " is shown as a miss. Where the benchmark times it, the fifth column is the same"
        " ratio with the evidence row alone in the guard's place (its six columns, one"
        " plain `INSERT ... ON CONFLICT DO NOTHING`, no inboxguard Python), measured in the"
        " same run: the floor no guard that writes the evidence the guarantees need can"
        " beat. A target that floor misses too is out of reach by design, and the verdict"
        " says so. Rows of different benchmarks may come from different runs; the last"
        " column says which.\n\n" + table(HEADER, rows)
    )


def main() -> None:
    text = body()
    if text is None:
        print("no recorded targets: run the benchmarks first")
        return
    write_section("targets", "Targets at a glance", text, command="python -m benchmarks targets")


if __name__ == "__main__":
    main()
