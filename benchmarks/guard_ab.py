"""The same guard workload on two checkouts of the package, alternating.

For a before/after comparison of a change that must not slow the guard (a
restructuring, say). One run is one process: fresh guards then duplicate
guards of the same commands on a PostgreSQL database of its own, the timed
section printed in seconds. With ``--vs OTHER`` the script runs itself,
alternately, against this checkout and ``OTHER`` (a directory holding an
``inboxguard`` package, e.g. a ``git worktree`` of an older commit), and
prints the median of the per-pair ratios this/other with their range:

    git worktree add /tmp/before 8680cef
    python benchmarks/guard_ab.py --vs /tmp/before --pairs 10
    python benchmarks/guard_ab.py --this /tmp/other --vs /tmp/before

Environment: ``INBOXGUARD_PG_URL`` (admin URL, default the local server),
``AB_MESSAGES`` (default 2000).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, insert, text

import inboxguard

PG_ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
MESSAGES = int(os.environ.get("AB_MESSAGES", "2000"))


def run_once() -> float:
    """One workload in this process; returns the timed section's seconds."""
    name = f"ab_{uuid.uuid4().hex[:10]}"
    admin = create_engine(f"{PG_ADMIN}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        engine = create_engine(f"{PG_ADMIN}/{name}")
        inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1))
        inbox.create_schema()
        meta = MetaData()
        orders = Table(
            "orders", meta, Column("id", Integer, primary_key=True), Column("ref", String(64))
        )
        meta.create_all(engine)
        started = time.perf_counter()
        for round_ in range(2):  # the second round replays every command: duplicates
            for i in range(MESSAGES):
                body = {"order": i, "amount": 100 + i}
                with (
                    engine.begin() as conn,
                    inbox.guard(
                        conn, consumer="ab.orders", command_id=f"order-{i}", payload=body
                    ) as entry,
                ):
                    if entry.duplicate:
                        continue
                    conn.execute(insert(orders).values(id=i, ref=f"r{i}"))
                    entry.result = {"round": round_}
        elapsed = time.perf_counter() - started
        engine.dispose()
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    return elapsed


def _timed(tree: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, __file__], env=env, capture_output=True, text=True, check=True
    ).stdout
    return float(out.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vs", type=Path, help="another checkout to compare against")
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument(
        "--this", type=Path, help="the checkout to measure (default: the one holding this file)"
    )
    args = parser.parse_args()
    if args.vs is None:
        print(f"{inboxguard.__file__} {run_once():.4f}")
        return
    here = (args.this or Path(__file__).resolve().parent.parent).resolve()
    ratios = []
    for _ in range(args.pairs):
        ratios.append(_timed(here) / _timed(args.vs.resolve()))
    print(
        f"{MESSAGES} fresh + {MESSAGES} duplicate guards, {args.pairs} alternating pairs:"
        f" this/other = {statistics.median(ratios):.3f}"
        f" (min {min(ratios):.3f}, max {max(ratios):.3f})"
    )


if __name__ == "__main__":
    main()
