"""Build the "Targets at a glance" section of docs/benchmarks.md.

The table is made only from ``benchmarks/results/*.json``, which each
benchmark with a target writes at the end of a publishable run (see
:mod:`benchmarks._harness`). A target no command has measured is not shown.
Run with ``python -m benchmarks targets`` (``make bench`` runs it last).
"""

from __future__ import annotations

from benchmarks._harness import recorded_targets
from benchmarks._report import table, write_section


def main() -> None:
    rows = []
    for target, load in recorded_targets():
        rows.append([f"`{target.benchmark}`", *target.row(), load])
    if not rows:
        print("no recorded targets: run the benchmarks first")
        return
    body = (
        "Each row is read from `benchmarks/results/NAME.json`, written by the named"
        " benchmark at the end of its last publishable run (five rounds or more): the"
        " median of the per-round ratios, with the smallest and largest round. A miss is"
        " shown as a miss.\n\n"
        + table(["benchmark", "target", "bound", "measured median (min-max)", "", "load"], rows)
    )
    write_section("targets", "Targets at a glance", body, command="python -m benchmarks targets")


if __name__ == "__main__":
    main()
