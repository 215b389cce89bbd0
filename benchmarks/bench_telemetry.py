"""What the telemetry costs the guard: off, and on without an SDK, against the
code before it existed.

One run is one process: a SQLite file database of its own, fresh guards then
duplicate guards of the same commands (each with a one-row write in the
block), the timed section printed in seconds. SQLite keeps the database's
share of each guard small, so any per-guard cost of the telemetry shows
more than it would on a server database. The variants:

* ``base``: the checkout given with ``--baseline`` (no telemetry code);
* ``off``: this checkout, ``Inbox(..., telemetry=False)``;
* ``on``: this checkout, telemetry on, ``opentelemetry-api`` installed and
  no SDK configured (the default of an application that never set one up).

Each round runs the three in a rotated order; the report is the median of
the per-round ratios ``off/base`` and ``on/base`` with their range:

    git worktree add /tmp/before main
    python benchmarks/bench_telemetry.py --baseline /tmp/before --rounds 7

Environment: ``TELEMETRY_MESSAGES`` (default 2000).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MESSAGES = int(os.environ.get("TELEMETRY_MESSAGES", "2000"))
HERE = Path(__file__).resolve().parents[1]


def run_once(variant: str) -> float:
    """One workload in this process; returns the timed section's seconds."""
    from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, insert

    import inboxguard

    options = {} if variant == "base" else {"telemetry": variant == "on"}
    with tempfile.TemporaryDirectory() as tmp:
        engine = create_engine(f"sqlite:///{tmp}/bench.db")
        inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), **options)
        inbox.create_schema()
        meta = MetaData()
        orders = Table(
            "orders", meta, Column("id", Integer, primary_key=True), Column("ref", String(64))
        )
        meta.create_all(engine)
        started = time.perf_counter()
        for _ in range(2):  # the second round replays every command: duplicates
            for i in range(MESSAGES):
                with (
                    engine.begin() as conn,
                    inbox.guard(conn, consumer="bench", command_id=f"o{i}", payload={"i": i}) as e,
                ):
                    if not e.duplicate:
                        conn.execute(insert(orders).values(ref=f"o{i}"))
        elapsed = time.perf_counter() - started
        engine.dispose()
    return elapsed


def _spawn(variant: str, baseline: Path) -> float:
    root = baseline if variant == "base" else HERE
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, __file__, "--run", variant],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="checkout without the telemetry")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--run", choices=["base", "off", "on"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        print(f"{run_once(args.run):.4f}")
        return
    if args.baseline is None:
        parser.error("give --baseline DIR (a checkout of the code before the telemetry)")
    order = ["base", "off", "on"]
    ratios: dict[str, list[float]] = {"off": [], "on": []}
    for round_ in range(args.rounds):
        shift = round_ % len(order)
        times = {v: _spawn(v, args.baseline) for v in order[shift:] + order[:shift]}
        for variant, found in ratios.items():
            found.append(times[variant] / times["base"])
        shown = " ".join(f"{v}={t:.3f}s" for v, t in times.items())
        print(f"round {round_ + 1}: {shown}", flush=True)
    for variant, values in ratios.items():
        print(
            f"{variant}/base: median {statistics.median(values):.3f}"
            f" (range {min(values):.3f}-{max(values):.3f}, {len(values)} rounds,"
            f" {2 * MESSAGES} guards each)"
        )


if __name__ == "__main__":
    main()
