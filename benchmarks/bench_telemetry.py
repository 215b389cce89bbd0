"""What the telemetry costs the guard: off, and on without an SDK, against the
code before it existed.

One run is one process: an in-memory SQLite database of its own, fresh
guards then duplicate guards of the same commands (each with a one-row write
in the block), the timed section printed in seconds (after one warm-up guard,
which pays for what is imported on first use). In memory, with no disk
and no network, a guard is nearly all Python, so any per-guard cost of the
telemetry shows far more than it would on a server database. The variants:

* ``base``: the checkout given with ``--baseline`` (no telemetry code);
* ``off``: this checkout, ``Inbox(..., telemetry=False)``;
* ``on``: this checkout, telemetry on, ``opentelemetry-api`` installed and
  no SDK configured (the default of an application that never set one up).

Each round runs the three in a rotated order; the report is the median of
the per-round ratios ``off/base`` and ``on/base`` with their range. Then
``--calls`` times the telemetry calls one guard makes, alone (claim probe,
verdict, handler span), off and on without an SDK:

    git worktree add /tmp/before main
    python benchmarks/bench_telemetry.py --baseline /tmp/before --rounds 9

Environment: ``TELEMETRY_MESSAGES`` (default 2000).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import time
import timeit
import warnings
from pathlib import Path

MESSAGES = int(os.environ.get("TELEMETRY_MESSAGES", "2000"))
HERE = Path(__file__).resolve().parents[1]


def run_once(variant: str) -> float:
    """One workload in this process; returns the timed section's seconds."""
    from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, insert

    import inboxguard

    options = {} if variant == "base" else {"telemetry": variant == "on"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the in-memory pool's quarantine warning
        engine = create_engine("sqlite://")
        inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), **options)
        inbox.create_schema()
        meta = MetaData()
        orders = Table(
            "orders", meta, Column("id", Integer, primary_key=True), Column("ref", String(64))
        )
        meta.create_all(engine)
        # One guard before the clock starts: the first one imports what the
        # variant loads lazily (opentelemetry), once per process.
        with (
            engine.begin() as conn,
            inbox.guard(conn, consumer="bench", command_id="warm", payload={}),
        ):
            pass
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


def calls(repeat: int = 200_000) -> dict[str, float]:
    """Microseconds of the telemetry calls of one guard, off and on (no SDK)."""
    from inboxguard._telemetry import OUTCOME, telemetry_for

    out = {}
    for name, enabled in (("off", False), ("on", True)):
        tel = telemetry_for(enabled)

        def one_guard(tel: object = tel) -> None:
            probe = tel.claim("bench", "o1")  # type: ignore[attr-defined]
            probe.decided("fresh")
            if tel.enabled:  # type: ignore[attr-defined]
                with tel.span("inboxguard.handler", "bench", "o1", **{OUTCOME: "fresh"}):  # type: ignore[attr-defined]
                    pass

        one_guard()
        best = min(timeit.repeat(one_guard, number=repeat, repeat=5))
        out[name] = best / repeat * 1e6
    return out


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
    parser.add_argument("--calls", action="store_true", help="only time the telemetry calls")
    args = parser.parse_args()
    if args.run:
        print(f"{run_once(args.run):.4f}")
        return
    if args.calls:
        for name, micros in calls().items():
            print(f"telemetry calls per guard, {name}: {micros:.2f} us")
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
    for name, micros in calls().items():
        print(f"telemetry calls per guard, {name}: {micros:.2f} us")


if __name__ == "__main__":
    main()
