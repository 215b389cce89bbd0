"""Run the benchmarks (all of them, or those named on the command line).

``python -m benchmarks`` (``make bench``) runs every benchmark in
:data:`ORDER`, then any other ``benchmarks/bench_*.py`` by name, and ends
with the "Targets at a glance" table rebuilt from the recorded results.
``python -m benchmarks NAME ...`` runs the named ones only (``NAME`` is
``bench_NAME.py`` or ``NAME.py`` here); ``python -m benchmarks targets``
rebuilds the table alone. Each module exposes ``main() -> None``, prints its
table and writes its section of docs/benchmarks.md. A benchmark that fails is
reported and the others still run; the exit status is then 1.
"""

from __future__ import annotations

import importlib
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: The guard's own cost first (the figures the targets are about), then the
#: peers, the Redis inbox and the telemetry, then the other parts, then the
#: adapters end to end (the slowest, each starting worker processes).
ORDER = (
    "inbox",
    "async",
    "breakdown",
    "candidates",
    "batch",
    "peers",
    "redis",
    "telemetry",
    "ledger",
    "outbox",
    "purge",
    "partitions",
    "celery",
    "dramatiq",
    "faststream",
    "kafka",
)


def module_for(name: str) -> str | None:
    """The module of benchmark ``name`` (``bench_NAME`` or ``NAME``), None if absent."""
    for stem in (f"bench_{name}", name):
        if (HERE / f"{stem}.py").exists():
            return f"benchmarks.{stem}"
    return None


def every() -> list[str]:
    """The names ``make bench`` runs, in order."""
    listed = [name for name in ORDER if module_for(name)]
    rest = sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))
    return listed + [name for name in rest if name not in listed]


def main() -> None:
    wanted = [arg.removeprefix("bench_").removesuffix(".py") for arg in sys.argv[1:]]
    if wanted == ["targets"]:
        importlib.import_module("benchmarks.targets").main()
        return
    unknown = [name for name in wanted if module_for(name) is None]
    if unknown:
        sys.exit(f"no benchmark named {unknown}; known: {', '.join(every())}")
    failed = []
    started = time.monotonic()
    for name in wanted or every():
        print(f"== {name}", flush=True)
        began = time.monotonic()
        module = module_for(name) or ""
        sys.argv = [f"benchmarks/{module.rpartition('.')[2]}.py"]  # no options: the defaults
        try:
            importlib.import_module(module).main()
        except Exception:
            traceback.print_exc()
            failed.append(name)
        print(f"== {name}: {time.monotonic() - began:.0f}s", flush=True)
    if not wanted:
        importlib.import_module("benchmarks.targets").main()
    print(f"== all: {time.monotonic() - started:.0f}s", flush=True)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
