"""What the telemetry costs the guard: off against on, and both against the
code before the telemetry existed.

One run is one process: an in-memory SQLite database of its own, fresh
guards then duplicate guards of the same commands (each with a one-row write
in the block), the timed section printed in seconds (after one warm-up guard,
which pays for what is imported on first use). In memory, with no disk
and no network, a guard is nearly all Python, so any per-guard cost of the
telemetry shows far more than it would on a server database. The variants:

* ``off``: this checkout, ``Inbox(..., telemetry=False)``;
* ``on``: this checkout, telemetry on, ``opentelemetry-api`` installed and
  no SDK configured (the default of an application that never set one up);
* ``base`` (with ``--baseline``): the package before the telemetry.

Each round runs the variants in a rotated order (``benchmarks._harness``);
the report is the median of the per-round ratios with their range, then the
time of the telemetry calls one guard makes, alone (claim probe, verdict,
handler span), off and on without an SDK:

    python -m benchmarks telemetry       # off vs on (make bench), section "telemetry"
    python benchmarks/bench_telemetry.py --baseline 2cb96bc^   # section "telemetry-baseline"
    python benchmarks/bench_telemetry.py --calls                # the calls alone

``--baseline`` takes a git revision (its ``inboxguard/`` is extracted to a
temporary directory) or a checkout directory. Environment: ``BENCH_ROUNDS``
(default 9), ``TELEMETRY_MESSAGES`` (default 2000).
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
BEFORE = "2cb96bc^"  # the commit before the telemetry was added


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


def _spawn(variant: str, tree: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, __file__, "--run", variant],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def _measure(
    variants: tuple[str, ...], trees: dict[str, Path], n_rounds: int
) -> list[dict[str, float]]:
    from benchmarks._harness import run_rounds

    return run_rounds(variants, lambda order, _i: {v: _spawn(v, trees[v]) for v in order}, n_rounds)


def _calls_table(micros: dict[str, float]) -> str:
    from benchmarks._report import table

    return table(
        ["the telemetry calls of one guard, alone (best of 5 x 200,000)", "us"],
        [["off", f"{micros['off']:.2f}"], ["on, no SDK", f"{micros['on']:.2f}"]],
    )


WORKLOAD = (
    "Each run is a fresh process doing {n:,} fresh then {n:,} duplicate guards (a one-row"
    " write in each fresh block) on an in-memory SQLite database, timed after one warm-up"
    " guard; a guard there took {us:.0f} us (median run / guards), nearly all Python, so"
    " the telemetry's share is as large as it can be (on a server database, where a guard"
    " takes a millisecond or more, the same microseconds weigh far less). The variants run"
    " in a rotated order each round; each ratio is taken within a round, median (min-max)"
    " shown."
)


def _per_guard_us(per_round: list[dict[str, float]], key: str) -> float:
    return _med(per_round, key) / (2 * MESSAGES) * 1e6


def within(n_rounds: int) -> None:
    """``make bench``: telemetry off against on (no SDK), both in this checkout."""
    from benchmarks._harness import Load, ratio
    from benchmarks._report import table, write_section

    load = Load()
    per_round = _measure(("off", "on"), {"off": HERE, "on": HERE}, n_rounds)
    micros = calls()
    load.stop()
    on = ratio(per_round, "on", "off")
    body = (
        WORKLOAD.format(n=MESSAGES, us=_per_guard_us(per_round, "off"))
        + " `off` is `Inbox(..., telemetry=False)`; `on` is the default with"
        " `opentelemetry-api` installed and no SDK configured (an application that never"
        " set one up). The cost of `off` against code without any telemetry needs a"
        " checkout of that code: see the next section.\n\n"
        + table(
            ["variant", "median s a run", "time / off"],
            [
                ["telemetry off", f"{_med(per_round, 'off'):.3f}", "1.000"],
                ["telemetry on, no SDK", f"{_med(per_round, 'on'):.3f}", on.format(3)],
            ],
        )
        + "\n\n"
        + _calls_table(micros)
    )
    write_section(
        "telemetry",
        "Telemetry cost (`benchmarks/bench_telemetry.py`)",
        body,
        load=load,
        rounds=n_rounds,
        command="python -m benchmarks telemetry",
    )


def against(baseline: str, n_rounds: int) -> None:
    """Off and on (no SDK) against ``baseline``, the code before the telemetry."""
    from benchmarks._harness import Load, ratio, source_tree
    from benchmarks._report import table, write_section

    load = Load()
    with source_tree(baseline) as tree:
        trees = {"base": tree, "off": HERE, "on": HERE}
        per_round = _measure(("base", "off", "on"), trees, n_rounds)
    load.stop()
    off, on = ratio(per_round, "off", "base"), ratio(per_round, "on", "base")
    unmeasurable = off.low <= 1.0 <= off.high
    verdict = (
        "met: the rounds of `off / base` fall on both sides of 1.000"
        if unmeasurable
        else "**missed**: every round of `off / base` is on one side of 1.000"
    )
    body = (
        WORKLOAD.format(n=MESSAGES, us=_per_guard_us(per_round, "base"))
        + f" `base` is the package at `{baseline}`, before the telemetry existed. Target:"
        f" no measurable cost when disabled; {verdict} ({off.format(3)}).\n\n"
        + table(
            ["variant", "median s a run", "time / before the telemetry"],
            [
                ["before the telemetry", f"{_med(per_round, 'base'):.3f}", "1.000"],
                ["telemetry off", f"{_med(per_round, 'off'):.3f}", off.format(3)],
                ["telemetry on, no SDK", f"{_med(per_round, 'on'):.3f}", on.format(3)],
            ],
        )
    )
    write_section(
        "telemetry-baseline",
        "Telemetry against the code before it",
        body,
        load=load,
        rounds=n_rounds,
        command=f"python benchmarks/bench_telemetry.py --baseline {baseline}",
    )


def _med(per_round: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in per_round)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline",
        help=f"a checkout or git revision without the telemetry (e.g. {BEFORE})",
    )
    parser.add_argument("--rounds", type=int, help="default BENCH_ROUNDS, else 9")
    parser.add_argument("--run", choices=["base", "off", "on"], help=argparse.SUPPRESS)
    parser.add_argument("--calls", action="store_true", help="only time the telemetry calls")
    args = parser.parse_args(argv)
    if args.run:
        print(f"{run_once(args.run):.4f}")
        return
    if args.calls:
        for name, micros in calls().items():
            print(f"telemetry calls per guard, {name}: {micros:.2f} us")
        return
    from benchmarks._harness import rounds

    n_rounds = args.rounds or rounds(default=9)
    began = time.monotonic()
    if args.baseline:
        against(args.baseline, n_rounds)
    else:
        within(n_rounds)
    print(f"elapsed {time.monotonic() - began:.0f}s")


if __name__ == "__main__":
    main()
