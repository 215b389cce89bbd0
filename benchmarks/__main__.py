"""Run every ``benchmarks/bench_*.py`` and ``benchmarks/peers.py`` (or those
named on the command line).

Each module exposes ``main() -> None``, prints its table and writes it to its
section of docs/benchmarks.md. After a full run (no names given) the
"Targets at a glance" table is rebuilt from the recorded results;
``python -m benchmarks targets`` rebuilds it alone.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def main() -> None:
    here = Path(__file__).resolve().parent
    wanted = sys.argv[1:]
    if wanted == ["targets"]:
        importlib.import_module("benchmarks.targets").main()
        return
    # peers.py is named by its issue; it runs with the bench_*.py modules.
    for path in [*sorted(here.glob("bench_*.py")), here / "peers.py"]:
        if wanted and path.stem.removeprefix("bench_") not in wanted and path.stem not in wanted:
            continue
        print(f"== {path.stem}", flush=True)
        importlib.import_module(f"benchmarks.{path.stem}").main()
    if not wanted:
        importlib.import_module("benchmarks.targets").main()


if __name__ == "__main__":
    main()
