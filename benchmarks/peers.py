"""Peers side by side: one handler, deduplicated six ways, measured in one run.

The handler is ``benchmarks/bench_inbox.py``'s mutation (an UPDATE of the
worker's account and an INSERT into the ledger, one PostgreSQL transaction,
opened as README.md opens it). The variants (``bare``, ``claim``,
``inboxguard``, ``redis-inbox``, ``powertools``, ``lock``) are described in
:mod:`benchmarks._peers_variants`.

Cost: each round starts fresh tables and ``workers`` processes; every worker
handles ``BENCH_PEERS_MESSAGES`` fresh commands per variant, and then, for
the variants that recognise a duplicate, the same commands again (the
verified duplicate). The variants run in an order rotated each round
(``_harness.run_rounds``), the workers start each variant together (a
barrier), and a variant's figure is its slowest worker's time per message.
Ratios to ``bare`` are taken within a round; the median of the rounds is
shown with the smallest and largest. Then the crash scenarios of
:mod:`benchmarks._peers_crash` run against every variant.

    python -m benchmarks peers     # or make bench; needs the bench extra

Environment: ``BENCH_ROUNDS`` (default 5; fewer is a smoke run that leaves
the page alone), ``BENCH_PEERS_MESSAGES`` (default 800),
``BENCH_PEERS_WORKERS`` (default ``1,4``), ``INBOXGUARD_PG_URL`` (admin URL),
``INBOXGUARD_REDIS_URL``.
"""

from __future__ import annotations

import importlib.util
import multiprocessing as mp
import os
import statistics
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from importlib.metadata import version
from queue import Empty
from typing import Any

from sqlalchemy import create_engine, text

from benchmarks import _harness
from benchmarks._peers_crash import SCENARIOS, SHORT_TTL, Outcome, play
from benchmarks._peers_variants import DEDUP, TIMED, VARIANTS, Peers, Place, create, drop_keys
from benchmarks._report import table, write_section

PG_ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
REDIS_URL = os.environ.get("INBOXGUARD_REDIS_URL", "redis://127.0.0.1:6379/0")
MESSAGES = int(os.environ.get("BENCH_PEERS_MESSAGES", "800"))
WORKERS = tuple(int(w) for w in os.environ.get("BENCH_PEERS_WORKERS", "1,4").split(","))
WARMUP = 100
LABELS = {
    "bare": "no dedup (bare handler)",
    "claim": "hand-written unique-constraint claim",
    "inboxguard": "inboxguard SQL (`inbox.guard`)",
    "redis-inbox": "inboxguard `RedisInbox`, PostgreSQL handler inside",
    "powertools": "AWS Powertools idempotency on Redis",
    "lock": "Redis lock, celery-once style",
    "evidence": "the evidence row alone (the floor; not a peer)",
}
#: inboxguard SQL's throughput at least this many times Powertools', per worker count.
POWERTOOLS_BOUNDS = {1: 1.00, 4: 1.20}


def _phases(order: list[str]) -> Iterator[str]:
    """Each variant's fresh pass, then (if it has one) its duplicate pass."""
    for variant in order:
        yield variant
        if variant in DEDUP:
            yield f"{variant}:dup"


def _worker(place: dict[str, Any], worker: int, order: list[str], barrier: Any, queue: Any) -> None:
    peers = Peers(Place(**place), worker)
    for variant in TIMED:  # warm every path: connections, statements, scripts
        warm = [f"warm-{variant}-w{worker}-{i}" for i in range(WARMUP)]
        for _ in range(2 if variant in DEDUP else 1):
            for cid in warm:
                peers.handlers[variant](cid)
    timings: dict[str, float] = {}
    for phase in _phases(order):
        variant = phase.split(":")[0]
        handle = peers.handlers[variant]
        ids = [f"{variant}-w{worker}-{i}" for i in range(MESSAGES)]
        barrier.wait()
        started = time.perf_counter()
        for cid in ids:
            handle(cid)
        timings[phase] = (time.perf_counter() - started) / MESSAGES
        barrier.wait()
    peers.close()
    queue.put(timings)


def _result(queue: Any, procs: list[Any]) -> dict[str, float]:
    """The next worker's timings; fails at once when a worker died instead."""
    while True:
        try:
            return dict(queue.get(timeout=2))
        except Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead:
                msg = f"a worker exited with {dead[0]} (its traceback is above)"
                raise RuntimeError(msg) from None


def _round(db_url: str, workers: int, order: list[str]) -> dict[str, float]:
    """One round: seconds per message of each phase, for the slowest worker."""
    place = Place(db_url, REDIS_URL, f"p{uuid.uuid4().hex[:8]}_")
    create(place, accounts=workers)
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(workers), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(asdict(place), w, order, barrier, queue))
        for w in range(workers)
    ]
    try:
        for proc in procs:
            proc.start()
        results = [_result(queue, procs) for _ in procs]
        for proc in procs:
            proc.join(60)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
        drop_keys(place)
    return {phase: max(r[phase] for r in results) for phase in results[0]}


def _throughput_rows(
    workers: int, rounds: list[dict[str, float]]
) -> tuple[list[list[object]], dict[str, _harness.Ratio]]:
    rows: list[list[object]] = []
    ratios: dict[str, _harness.Ratio] = {}
    for variant in TIMED:
        us = statistics.median(r[variant] for r in rounds) * 1e6
        cost = _harness.ratio(rounds, variant, "bare")
        dup = "-"
        if variant in DEDUP:
            ratios[f"{variant}:dup"] = _harness.ratio(rounds, f"{variant}:dup", "bare")
            dup = str(ratios[f"{variant}:dup"])
        ratios[variant] = cost
        rows.append([LABELS[variant], workers, f"{us:,.0f}", str(cost), dup])
    ratios["inboxguard/powertools"] = _harness.ratio(rounds, "powertools", "inboxguard")
    ratios["inboxguard/evidence"] = _harness.ratio(rounds, "inboxguard", "evidence")
    ratios["evidence/powertools"] = _harness.ratio(rounds, "powertools", "evidence")
    return rows, ratios


def _cell(outcome: Outcome) -> str:
    verdict = (
        f"**yes** ({outcome.applied} rows)" if outcome.twice else f"no ({outcome.applied} row)"
    )
    return f"{verdict}: {outcome.redelivery}"


def _scenario_rows(outcomes: list[Outcome]) -> list[list[object]]:
    by = {(o.variant, o.scenario): o for o in outcomes}
    rows: list[list[object]] = []
    for variant in VARIANTS:
        if (variant, SCENARIOS[0]) not in by:
            continue
        at_kill = by[variant, "commit"].record_at_kill
        atomic = (
            "- (no record)" if variant == "bare" else ("yes" if at_kill == "completed" else "no")
        )
        cells = [_cell(by[variant, s]) for s in SCENARIOS]
        rows.append([LABELS[variant], *cells, at_kill, atomic])
    return rows


def _targets(per_workers: Mapping[int, dict[str, _harness.Ratio]]) -> list[_harness.Target]:
    targets = []
    for workers, ratios in per_workers.items():
        label = f"{workers} worker{'s' if workers > 1 else ''}"
        targets.append(
            _harness.Target(
                "peers",
                f"inboxguard SQL throughput / Powertools on Redis, {label}",
                POWERTOOLS_BOUNDS.get(workers, POWERTOOLS_BOUNDS[4]),
                "higher",
                ratios["inboxguard/powertools"],
                floor=ratios["evidence/powertools"],
                floor_variant="Powertools' time / the evidence row's",
            )
        )
        targets.append(
            _harness.Target(
                "peers",
                f"inboxguard SQL verified duplicate / bare message, {label}",
                0.55,
                "lower",
                ratios["inboxguard:dup"],
                floor=ratios["evidence:dup"],
                floor_variant="the evidence row's conflict / bare",
            )
        )
    return targets


def _body(
    n_rounds: int,
    throughput: list[list[object]],
    per_workers: Mapping[int, dict[str, _harness.Ratio]],
    scenarios: list[list[object]],
) -> str:
    versus = "; ".join(
        f"{w} worker{'s' if w > 1 else ''}: {r['inboxguard/powertools']}"
        for w, r in per_workers.items()
    )
    floor = "; ".join(
        f"{w} worker{'s' if w > 1 else ''}: {r['inboxguard/evidence']}"
        for w, r in per_workers.items()
    )
    return f"""\
One handler, the mutation of the inbox benchmark (an UPDATE of the worker's
account and an INSERT into a ledger, one PostgreSQL transaction opened with
`Session(engine)` and `session.begin()` as README.md shows), deduplicated six
ways, each as its own documentation shows:

- **no dedup**: the handler alone;
- **unique-constraint claim**: `INSERT ... ON CONFLICT DO NOTHING` of the command ID
  into a one-column keyed table in the same transaction; a duplicate hits the
  conflict and skips the mutation;
- **inboxguard SQL**: `inbox.guard` in the same session, the result stored with
  `entry.result`;
- **`RedisInbox`**: the Redis guard around the same PostgreSQL handler. The Redis
  inbox makes its claim atomic with writes queued on the Redis pipeline; here the
  state is in PostgreSQL, so the handler's transaction commits inside the guard's
  block and the claim follows in Redis's `EXEC`: not atomic, and shown as a user
  who puts it in front of a SQL handler would get it;
- **Powertools**: `idempotent_function` with `CachePersistenceLayer` (the name
  `RedisCachePersistenceLayer` now has) on the local Redis, aws-lambda-powertools
  {version("aws-lambda-powertools")}, `event_key_jmespath="command_id"`,
  `raise_on_no_idempotency_key=True`, its default one-hour expiry. Payload
  validation is left off: with `payload_validation_jmespath` set, this Redis layer
  rewrites the record at completion without the payload hash and refuses every
  identical retry with `IdempotencyValidationError`;
- **the evidence row** (the floor, not a peer): the inbox row alone in the same
  transaction, a plain `INSERT ... VALUES ... ON CONFLICT DO NOTHING` of its six
  columns (no claim logic, no inboxguard Python), a conflict skipping the mutation;
  no guard that writes the evidence the guarantees need can cost less;
- **Redis lock**: celery-once's mechanism moved to the consumer: `redis.lock.Lock`
  acquired without blocking (`SET NX PX`, one-hour timeout) around the handler,
  deleted after it; a held lock refuses the delivery (`AlreadyQueued`).

**Cost.** {MESSAGES:,} fresh commands per worker per variant after a {WARMUP}-message
warm-up, then the same commands again for the variants that recognise a
duplicate; {n_rounds} rounds, each on fresh tables with the variants in an order
rotated per round and the workers (processes) started together on each. Time per
message is the slowest worker's; each ratio is taken within a round against the
bare handler, median (min-max) shown.

{
        table(
            ["variant", "workers", "us/message", "time / bare", "verified duplicate / bare"],
            throughput,
        )
    }

inboxguard SQL throughput against Powertools (Powertools' time / inboxguard's, per
round): {versus}. inboxguard SQL against the evidence row (its time / the row's):
{floor}.

**Crashes.** Each variant meets three deliveries of its own commands, each first
delivered by a worker process of its own, and a ledger row count afterwards
decides whether the command was applied twice:

- **(a) killed after the commit**: the handler's transaction commits, then the worker
  is killed with SIGKILL before it acks and before the variant records the command
  (Powertools before it writes COMPLETED, `RedisInbox` before its `EXEC`, the lock
  while still held). The message comes back once every time to live has run out, as
  a broker's visibility timeout or a later retry brings it;
- **(a') killed after the handler returned**: the variant has recorded the command
  (or released its lock), the worker is killed before the ack, and the message comes
  back at once, every tool at its default time to live;
- **(b) a late duplicate**: the command was handled and acknowledged, and comes back
  after Powertools' `expires_after_seconds` and the lock's timeout have passed,
  well inside inboxguard's retention (one day here).

In (a) and (b) the tools' time to live is {SHORT_TTL} s, standing in for their defaults (an
hour for Powertools and the lock, 60 s for `RedisInbox`'s lease): the outcome is
the same, only sooner. "Record at the kill" is what the variant's own store held
right after the kill in (a); the mutation and the record are atomic when that
record was already complete, committed with the mutation.

{
        table(
            [
                "variant",
                "(a) applied twice?",
                "(a') applied twice?",
                "(b) applied twice?",
                "record at the kill in (a)",
                "mutation and record atomic?",
            ],
            scenarios,
        )
    }
"""


def main() -> None:
    """Measure the peers at 1 and 4 workers, play the crashes, write the section."""
    if importlib.util.find_spec("aws_lambda_powertools") is None:
        sys.exit("peers compares against AWS Powertools: pip install -e '.[bench]' first")
    started = time.monotonic()
    n_rounds = _harness.rounds()
    load = _harness.Load()
    db = f"peers_{uuid.uuid4().hex[:8]}"
    admin = create_engine(f"{PG_ADMIN}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{db}"'))
    url = f"{PG_ADMIN}/{db}"
    throughput: list[list[object]] = []
    per_workers: dict[int, dict[str, _harness.Ratio]] = {}
    try:
        for workers in WORKERS:
            print(f"peers, {workers} worker(s), {MESSAGES} messages each", flush=True)
            rounds = _harness.run_rounds(
                list(TIMED), lambda order, _i, w=workers: _round(url, w, order), n_rounds
            )
            rows, per_workers[workers] = _throughput_rows(workers, rounds)
            throughput += rows
        print("crash scenarios", flush=True)
        outcomes = play(url, REDIS_URL, f"c{uuid.uuid4().hex[:8]}_")
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()
    load.stop()
    targets = _targets(per_workers)
    for target in targets:
        print("  " + " | ".join(target.row()))
    _harness.record("peers", targets, load, n_rounds)
    body = _body(n_rounds, throughput, per_workers, _scenario_rows(outcomes))
    write_section("peers", "Peers side by side", body, load=load, rounds=n_rounds)
    print(f"peers: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
