"""Run every ``benchmarks/bench_*.py`` (or those named on the command line).

Each module exposes ``main() -> None``, prints its table and writes it to its
section of docs/benchmarks.md.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def main() -> None:
    here = Path(__file__).resolve().parent
    wanted = sys.argv[1:]
    for path in sorted(here.glob("bench_*.py")):
        if wanted and path.stem.removeprefix("bench_") not in wanted and path.stem not in wanted:
            continue
        print(f"== {path.stem}", flush=True)
        importlib.import_module(f"benchmarks.{path.stem}").main()


if __name__ == "__main__":
    main()
