"""The stress run: many worker processes, one PostgreSQL, random SIGKILLs.

Publishes COMMANDS messages to a RabbitMQ queue: unique transfer commands,
re-sends of the same command and payload (``--duplicates``, a fraction of the
messages) and, for a few commands, a second message with the same command ID
and another payload (``--mismatches``), shuffled. WORKERS processes consume
it with the kombu consumer (:func:`inboxguard.adapters.kombu.guarded`, prefetch
4, ack after the commit); each applies a command as one UPDATE of an account
and one INSERT into a ledger, in the guard's transaction. Meanwhile a killer
SIGKILLs a random consuming worker every ``--kill-interval`` seconds on
average (uniformly 0 to twice that, counted from the moment every worker
consumes again) and starts a new one in its place; the broker delivers the
killed worker's unacked messages again. At most one worker is starting at a
time, so a loaded machine, where a worker needs seconds to start, sees fewer
kills rather than a fleet that never gets past its start-up.

When the ledger holds every command, the quarantine every mismatch and the
queue nothing, the workers are stopped and the run checks, where a user would
look: one ledger row per command, every account balance, one inbox row per
command, one quarantine record (``payload_mismatch``) per mismatched command,
each mismatch dead-lettered once and never applied, the work queue empty.

It reports throughput (messages and commands per second, from the workers'
start to the last message settled, restarts included) and the claim latency
p50/p99: the time each delivery spends entering the guard (the claim statement
and its decision), measured in the workers.

    python -m benchmarks.stress                    # the issue's run: 16 workers, 200,000 messages
    python -m benchmarks.stress --workers 4 --commands 3000 --kill-interval 0.5   # the test's
    python -m benchmarks.stress --publish          # also writes its section of docs/benchmarks.md

Each run creates its own database (``ig_stress_<id>``) and queues
(``inboxguard-stress-<id>``, ``.dead``, ``.dlx``) and drops them at the end,
unless ``--keep``. ``INBOXGUARD_PG_URL`` and ``INBOXGUARD_AMQP_URL`` point it
elsewhere. Exits 1 when a check fails. Not a CI test: tests/scale runs a small
configuration of it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kombu import Connection
from sqlalchemy import create_engine, insert, text

import inboxguard
from benchmarks._stress_checks import (
    Check,
    Names,
    Plan,
    counts,
    dead_depth,
    make_plan,
    progress,
    queue_state,
    verify,
)
from benchmarks._stress_fleet import Fleet
from benchmarks._stress_worker import RETENTION, business_tables, dead_queue, work_queue

ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
BROKER = os.environ.get("INBOXGUARD_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")


def parse(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.stress", description=__doc__.split("\n")[0]
    )
    p.add_argument("--workers", type=int, default=16, help="worker processes (16)")
    p.add_argument("--commands", type=int, default=200_000, help="messages published (200,000)")
    p.add_argument("--duplicates", type=float, default=0.30, help="fraction re-sent (0.30)")
    p.add_argument("--mismatches", type=float, default=0.01, help="fraction same ID, other payload")
    p.add_argument(
        "--kill-interval",
        type=float,
        default=2.0,
        help="mean seconds from every worker consuming to the next SIGKILL (2)",
    )
    p.add_argument("--seed", type=int, default=17, help="the plan's and the killer's seed (17)")
    p.add_argument("--accounts", type=int, default=1000, help="accounts the commands move money on")
    p.add_argument("--prefetch", type=int, default=4, help="unacked messages per worker (4)")
    p.add_argument("--deadline", type=float, default=1800, help="seconds to wait for the outcome")
    p.add_argument(
        "--progress-every", type=float, default=5.0, help="seconds between progress lines"
    )
    p.add_argument("--json", type=Path, help="also write the summary as JSON to this file")
    p.add_argument("--keep", action="store_true", help="keep the database and queues")
    p.add_argument("--publish", action="store_true", help="write the docs/benchmarks.md section")
    args = p.parse_args(argv)
    for flag in ("workers", "accounts", "prefetch"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag} must be at least 1")
    if args.kill_interval < 0:
        p.error("--kill-interval is seconds (0 turns the killer off), not negative")
    try:
        counts(args.commands, args.duplicates, args.mismatches)
    except ValueError as bad:
        p.error(str(bad))
    return args


def wait_for(what: str, predicate: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.1)


def reachable() -> None:
    """Fail with the setting to change when PostgreSQL or RabbitMQ is not there."""
    try:
        create_engine(f"{ADMIN}/postgres").connect().close()
    except Exception as error:
        raise SystemExit(f"PostgreSQL at {ADMIN} (INBOXGUARD_PG_URL): {error}") from error
    try:
        with Connection(BROKER, connect_timeout=5) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as error:
        raise SystemExit(f"RabbitMQ at {BROKER} (INBOXGUARD_AMQP_URL): {error}") from error


def prepare(names: Names, plan: Plan, accounts: int, create_db: str | None) -> None:
    """Create the database, the inbox and business tables, and the queues."""
    if create_db:
        admin = create_engine(f"{ADMIN}/postgres", isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{create_db}"'))
        admin.dispose()
    engine = create_engine(names.db_url)
    inboxguard.Inbox(engine, retention=RETENTION, table_prefix=names.prefix).create_schema()
    accounts_t, _ = business_tables(names.prefix)
    accounts_t.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(insert(accounts_t), [{"id": a, "balance": 0} for a in range(accounts)])
    engine.dispose()
    with Connection(names.broker_url) as conn:
        channel = conn.default_channel
        dead_queue(names.queue)(channel).declare()
        work_queue(names.queue)(channel).declare()


def publish(names: Names, plan: Plan) -> float:
    """Publish every body (persistent, with its sent time); return the seconds it took."""
    start = time.monotonic()
    with Connection(names.broker_url) as conn:
        producer = conn.Producer(serializer="json")
        for i, body in enumerate(plan.bodies, 1):
            producer.publish(body, exchange="", routing_key=names.queue, timestamp=int(time.time()))
            if i % 50_000 == 0:
                print(f"  published {i:,}/{len(plan.bodies):,}", flush=True)
    wait_for(
        "every published message in the queue",
        lambda: queue_state(names.broker_url, names.queue)[0] == len(plan.bodies),
        120,
    )
    return time.monotonic() - start


def cleanup(names: Names, create_db: str | None) -> None:
    with Connection(names.broker_url) as conn:
        channel = conn.default_channel
        for queue in (work_queue(names.queue), dead_queue(names.queue)):
            queue(channel).delete()
        dead_queue(names.queue).exchange(channel).delete()
    engine = create_engine(names.db_url if not create_db else f"{ADMIN}/postgres")
    if create_db:
        with engine.execution_options(isolation_level="AUTOCOMMIT").connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{create_db}" WITH (FORCE)'))
    engine.dispose()


class Run:
    """One stress run, from the plan to the checks."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        run_id = uuid.uuid4().hex[:8]
        self.database = f"ig_stress_{run_id}"
        self.names = Names(
            db_url=f"{ADMIN}/{self.database}",
            broker_url=BROKER,
            prefix="stress_",
            queue=f"inboxguard-stress-{run_id}",
        )
        self.plan = make_plan(
            args.commands, args.duplicates, args.mismatches, args.accounts, args.seed
        )
        self.workdir = Path(tempfile.mkdtemp(prefix=f"stress-{run_id}-"))
        self.fleet = Fleet(
            {
                "db_url": self.names.db_url,
                "broker_url": self.names.broker_url,
                "prefix": self.names.prefix,
                "queue": self.names.queue,
                "prefetch": args.prefetch,
                "lock_timeout_ms": 2000,
                "max_attempts": 5,
                "retry_delay_ms": 200,
            },
            args.workers,
            self.workdir,
        )
        self.figures: dict[str, Any] = {}

    def consume(self) -> float:
        """Workers and killer until the outcome is in; returns the seconds taken."""
        args, names, plan = self.args, self.names, self.plan
        rng = random.Random(args.seed + 1)
        engine = create_engine(names.db_url, pool_size=1)
        total = len(plan.bodies)
        mis = len(plan.mismatched)
        start = time.monotonic()
        deadline = start + args.deadline
        next_kill: float | None = None  # set once every worker consumes
        next_show, next_look = start + args.progress_every, start
        shown_at, shown_done = start, 0
        self.fleet.start_all()
        try:
            while True:
                now = time.monotonic()
                if now > deadline:
                    raise TimeoutError(f"the outcome was not in after {args.deadline:.0f} s")
                self.fleet.reap()
                if now >= next_look:
                    applied, held = progress(engine, names)
                    ready, _ = queue_state(names.broker_url, names.queue)
                    dead = dead_depth(names.broker_url, names.queue)
                    next_look = now + 0.5
                    if applied >= plan.unique and held >= mis and ready == 0 and dead >= mis:
                        return time.monotonic() - start
                    if now >= next_show:
                        done = total - ready
                        rate = (done - shown_done) / (now - shown_at)
                        print(
                            f"[{now - start:5.0f}s] applied {applied:,}/{plan.unique:,}"
                            f"  quarantined {held:,}/{mis:,}  queued {ready:,}  dead {dead:,}"
                            f"  kills {self.fleet.kills}  {rate:,.0f} msg/s",
                            flush=True,
                        )
                        shown_at, shown_done, next_show = now, done, now + args.progress_every
                if args.kill_interval and next_kill is None:
                    if self.fleet.all_consuming():
                        next_kill = now + self._gap(rng)
                elif args.kill_interval and now >= next_kill:
                    self.fleet.kill_one(rng)
                    next_kill = None
                time.sleep(0.05)
        finally:
            engine.dispose()

    def _gap(self, rng: random.Random) -> float:
        return rng.uniform(0, 2 * self.args.kill_interval) if self.args.kill_interval else 0

    def settle(self) -> int:
        """Stop the workers; while their stop put messages back, run them again
        (no kills) until the stopped fleet leaves an empty queue. Returns the
        number of extra passes."""
        passes = 0
        while True:
            forced = self.fleet.stop_all()
            if forced:
                print(f"  {forced} workers did not stop on SIGTERM and were killed", flush=True)
            ready, _ = queue_state(self.names.broker_url, self.names.queue)
            if ready == 0 or passes >= 5:
                return passes
            passes += 1
            print(f"  {ready} messages back in the queue at the stop: another pass", flush=True)
            self.fleet.start_all()
            wait_for(
                "the queue drained again",
                lambda: queue_state(self.names.broker_url, self.names.queue)[0] == 0,
                self.args.deadline,
            )

    def samples(self) -> dict[str, list[int]]:
        """Guard-entry times (microseconds) by outcome, from every worker's stats file."""
        out: dict[str, list[int]] = {}
        for path in self.workdir.glob("*.stats"):
            for line in path.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1].isdigit():
                    out.setdefault(parts[0], []).append(int(parts[1]))
        return out


def percentile(values: Sequence[int], q: float) -> float:
    """Nearest-rank percentile of ``values`` (sorted), in milliseconds."""
    rank = max(0, min(len(values) - 1, int(-(-q * len(values) // 1)) - 1))
    return values[rank] / 1000


def summarise(run: Run, seconds: float, publish_s: float, passes: int) -> dict[str, Any]:
    by_outcome = run.samples()
    every = sorted(v for values in by_outcome.values() for v in values)
    fresh = sorted(by_outcome.get("F", []))
    plan, total = run.plan, len(run.plan.bodies)
    return {
        "workers": run.args.workers,
        "messages": total,
        "commands": plan.unique,
        "duplicates": plan.duplicates,
        "mismatches": len(plan.mismatched),
        "seconds": round(seconds, 1),
        "publish_seconds": round(publish_s, 1),
        "messages_per_s": round(total / seconds, 1),
        "commands_per_s": round(plan.unique / seconds, 1),
        "kills": run.fleet.kills,
        "workers_started": run.fleet.started,
        "extra_passes": passes,
        "claims_measured": len(every),
        "claims_by_outcome": {k: len(v) for k, v in sorted(by_outcome.items())},
        "claim_p50_ms": percentile(every, 0.50) if every else None,
        "claim_p99_ms": percentile(every, 0.99) if every else None,
        "fresh_claim_p50_ms": percentile(fresh, 0.50) if fresh else None,
        "fresh_claim_p99_ms": percentile(fresh, 0.99) if fresh else None,
        "unexpected_exits": run.fleet.unexpected,
    }


def markdown(s: dict[str, Any], checks: list[Check], seed: int, kill_interval: float) -> str:
    from benchmarks._report import table

    outcomes = Counter(s["claims_by_outcome"])
    rows = [
        ["worker processes", s["workers"]],
        [
            "messages published",
            f"{s['messages']:,}: {s['commands']:,} commands, {s['duplicates']:,} re-sent"
            f" (same payload), {s['mismatches']:,} same ID with another payload; seed {seed}",
        ],
        [
            "SIGKILLs (a worker replaced each time)",
            f"{s['kills']} (mean gap {kill_interval} s once every worker consumes again)",
        ],
        ["wall time, workers' start to the last message settled", f"{s['seconds']} s"],
        ["throughput", f"{s['messages_per_s']:,} messages/s, {s['commands_per_s']:,} commands/s"],
        ["claim p50 / p99 (every guard entry)", f"{s['claim_p50_ms']} ms / {s['claim_p99_ms']} ms"],
        [
            "claim p50 / p99 (fresh commands)",
            f"{s['fresh_claim_p50_ms']} ms / {s['fresh_claim_p99_ms']} ms",
        ],
        [
            "guard entries measured",
            f"{s['claims_measured']:,}: {outcomes['F']:,} fresh, {outcomes['D']:,} duplicate,"
            f" {outcomes['M']:,} mismatch, {outcomes['B']:,} in progress, {outcomes['E']:,} other",
        ],
    ]
    checked = table(
        ["check", "result", "detail"],
        [[c.name, "passed" if c.ok else "**FAILED**", c.detail] for c in checks],
    )
    method = (
        "One run (a stress run, not a ratio). The workers are kombu consumers on RabbitMQ"
        " (`inboxguard.adapters.kombu.guarded`, prefetch 4, ack after the commit), each command"
        " one UPDATE of an account and one INSERT into a ledger in the guard's transaction,"
        " all on one PostgreSQL. The killer SIGKILLs a random consuming worker (a random gap"
        " after every worker consumes again, so at most one is starting) and starts another;"
        " the broker delivers its unacked messages again. Throughput counts from the"
        " workers' start (worker restarts included, publishing not) to the last message"
        " settled. The claim time is each delivery's entry into the guard (claim statement and"
        " decision), measured in the workers; samples a SIGKILL caught unflushed are lost."
        " The checks read the ledger, the accounts, the inbox and quarantine tables and both"
        " queues after the workers stopped."
    )
    return method + "\n\n" + table(["figure", "value"], rows) + "\n\n" + checked


def _shown(argv: Sequence[str]) -> list[str]:
    """The command line without where the JSON summary went (no figure depends on it)."""
    out, skip = [], False
    for arg in argv:
        if skip or arg == "--json" or arg.startswith("--json="):
            skip = arg == "--json"
            continue
        out.append(arg)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from benchmarks._harness import Load

    args = parse(sys.argv[1:] if argv is None else argv)
    reachable()
    load = Load()
    run = Run(args)
    plan = run.plan
    print(
        f"stress: {args.workers} workers, {len(plan.bodies):,} messages ({plan.unique:,} commands,"
        f" {plan.duplicates:,} re-sends, {len(plan.mismatched):,} mismatches), SIGKILL every"
        f" ~{args.kill_interval} s, seed {args.seed}; database {run.database}, queue"
        f" {run.names.queue}, logs in {run.workdir}",
        flush=True,
    )
    created = run.database
    if args.json:  # where the state lives, before there is any (a failed run can be cleaned)
        args.json.write_text(json.dumps({"names": asdict(run.names), "database": run.database}))
    try:
        prepare(run.names, plan, args.accounts, created)
        publish_s = publish(run.names, plan)
        print(
            f"  published {len(plan.bodies):,} in {publish_s:.1f} s; starting workers", flush=True
        )
        seconds = run.consume()
        print(f"  outcome in after {seconds:.1f} s ({run.fleet.kills} kills); stopping", flush=True)
        passes = run.settle()
        summary = summarise(run, seconds, publish_s, passes)
        checks = verify(plan, run.names, len(plan.bodies))
        if run.fleet.unexpected:
            checks.append(
                Check("no worker exited on its own", False, "; ".join(run.fleet.unexpected)[:500])
            )
    except BaseException:
        run.fleet.kill_all()
        raise
    finally:
        load.stop()
        if not args.keep:
            cleanup(run.names, created)
        else:
            print(f"  kept database {run.database} and queue {run.names.queue}", flush=True)
    body = markdown(summary, checks, args.seed, args.kill_interval)
    command = "python -m benchmarks.stress " + shlex.join(
        _shown(sys.argv[1:] if argv is None else argv)
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    **summary,
                    "checks": [asdict(c) for c in checks],
                    "names": asdict(run.names),
                    "database": run.database,
                    "kept": args.keep,
                    "load": str(load),
                    "command": command.strip(),
                },
                indent=2,
            )
        )
    if args.publish:
        from benchmarks._report import write_section

        write_section("stress", "A stress run", body, load=load, command=command.strip())
    else:
        print(f"\n{body}\n\n_{load}; `{command.strip()}`_")
    failed = [c for c in checks if not c.ok]
    print("stress: " + ("every check passed" if not failed else f"{len(failed)} checks FAILED"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
