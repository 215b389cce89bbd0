"""Build the "Targets at a glance" section of docs/benchmarks.md.

The table is made only from ``benchmarks/results/*.json``, which each
benchmark with a target writes at the end of a publishable run (see
:mod:`benchmarks._harness`). A target no command has measured is not shown.
Run with ``python -m benchmarks targets`` (``make bench`` runs it last).
"""

from __future__ import annotations

from benchmarks._harness import MIN_ROUNDS, recorded_runs
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


def body() -> str | None:
    """The section's text, or None when no benchmark has recorded a target."""
    rows = []
    for run in recorded_runs():
        when = f"{run.date}, {run.rounds} rounds, {run.load}, `{run.command}`"
        for target in run.targets:
            rows.append([f"`{run.benchmark}`", *target.row(), when])
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
