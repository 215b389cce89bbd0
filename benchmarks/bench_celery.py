"""End-to-end throughput of the reference Celery task, with and without the inbox.

One real ``celery worker`` (prefork, concurrency 2, Redis broker, PostgreSQL)
serves three tasks with the same settings, on the same queue, broker and
tables:

- ``plain``: ``reference.apply_transfer_plain``, the body in a plain
  transaction (the baseline);
- ``evidence``: ``reference.apply_transfer_evidence``, the plain task plus
  the inbox row alone, a plain ``INSERT ... VALUES ... ON CONFLICT DO
  NOTHING`` of its six columns into an inbox table of its own in the same
  transaction (``evidence_statement``/``evidence_row`` of
  ``benchmarks/bench_inbox.py``): the floor the project counts from (issue
  37), since no guard that writes the evidence the guarantees need can cost
  less;
- ``inbox``: ``reference.apply_transfer``, the guarded task.

After a warm-up of each, every round runs the variants in an order rotated
per round (``benchmarks._harness``); a variant's figure is fresh commands per
second, timed from the first publish until the last ledger row is committed.
Ratios are taken within a round; the median of the per-round ratios (min-max)
is reported: inbox/plain is recorded as the target ``>= 0.90``, and
evidence/plain and inbox/evidence show how much of the gap the evidence row
alone accounts for.

``BENCH_ROUNDS`` (default 5) and ``BENCH_CELERY_COMMANDS`` (default 1000 a
variant a round) size the run; a default run takes about four minutes.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis
from sqlalchemy import create_engine, func, select, text

from benchmarks import _harness
from benchmarks._report import table, write_section
from integrations.celery import business
from integrations.celery.producer import commands, publish
from integrations.celery.settings import (
    EVIDENCE_TASK_NAME,
    PLAIN_TASK_NAME,
    TASK_NAME,
    Settings,
    create_app,
)

REPO = Path(__file__).resolve().parent.parent
PG_ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
REDIS_URL = os.environ.get("INBOXGUARD_REDIS_URL", "redis://127.0.0.1:6379/0")
COMMANDS = int(os.environ.get("BENCH_CELERY_COMMANDS", "1000"))
VARIANTS = ("plain", "evidence", "inbox")
TASKS = {"plain": PLAIN_TASK_NAME, "evidence": EVIDENCE_TASK_NAME, "inbox": TASK_NAME}
TARGET = 0.90


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _start_worker(settings: Settings, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, **settings.env(), "PYTHONPATH": str(REPO)}
    cmd = [
        sys.executable, "-m", "celery", "-A", "integrations.celery.app", "worker",
        "-Q", settings.queue, "--pool=prefork", "-c", "2", "--loglevel=WARNING",
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]  # fmt: skip
    with log.open("wb") as out:
        return subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _round(app, settings, engine, ledger, *, variant: str, tag: str) -> float:
    with engine.connect() as conn:
        before = conn.execute(select(func.count()).select_from(ledger)).scalar_one()
    target = before + COMMANDS

    def done() -> bool:
        with engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(ledger)).scalar_one() >= target

    start = time.perf_counter()
    publish(app, settings, commands(COMMANDS, prefix=tag), task=TASKS[variant])
    _wait(done, 300, f"round {tag}")
    return COMMANDS / (time.perf_counter() - start)


def main() -> None:
    began = time.monotonic()
    n_rounds = _harness.rounds()
    load = _harness.Load()
    name = f"ig_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(f"{PG_ADMIN}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    queue = f"igbench{uuid.uuid4().hex[:8]}"
    settings = Settings(
        db_url=f"{PG_ADMIN}/{name}",
        broker_url=REDIS_URL,
        table_prefix="bench_",
        queue=queue,
        retention=dt.timedelta(days=7),
        redis_keyprefix=f"{queue}:",
    )
    engine = create_engine(settings.db_url)
    business.create_schema(engine, settings.table_prefix, settings.retention)
    # The evidence task's inbox table, of its own.
    business.make_inbox(
        engine, f"{settings.table_prefix}{business.EVIDENCE_PREFIX}", settings.retention
    ).create_schema()
    ledger = business.tables(settings.table_prefix).ledger
    app = create_app(settings, include_tasks=False)
    log = Path(tempfile.gettempdir()) / f"{queue}.log"
    worker = _start_worker(settings, log)

    def one_round(order: list[str], i: int) -> dict[str, float]:
        return {v: _round(app, settings, engine, ledger, variant=v, tag=f"r{i}{v}") for v in order}

    try:
        for variant in VARIANTS:  # warm-up: imports, connections, first statements
            _round(app, settings, engine, ledger, variant=variant, tag=f"warm{variant}")
        per_round = _harness.run_rounds(VARIANTS, one_round, n_rounds)
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(30)
        app.close()
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=f"{queue}:*"))
        if keys:
            client.delete(*keys)
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    load.stop()
    measured = _harness.ratio(per_round, "inbox", "plain")
    floor = _harness.ratio(per_round, "evidence", "plain")
    over_floor = _harness.ratio(per_round, "inbox", "evidence")
    target = _harness.Target(
        benchmark="celery",
        label="Celery task, Redis, end to end: inbox / plain throughput",
        bound=TARGET,
        better="higher",
        measured=measured,
        floor=floor,
        floor_variant="evidence row / plain",
    )
    _harness.record("celery", [target], load, n_rounds)
    rows = [
        ["plain transaction (baseline)", *_rates(per_round, "plain"), "1.00", "-"],
        ["evidence row: plain + the inbox row's `INSERT ... ON CONFLICT DO NOTHING` (floor)",
         *_rates(per_round, "evidence"), str(floor), "1.00"],
        ["`inbox_task` (claim + result in the same transaction)",
         *_rates(per_round, "inbox"), str(measured), str(over_floor)],
    ]  # fmt: skip
    body = (
        "Reference task `apply_transfer` (ledger insert + balance update), one `celery worker`"
        " (prefork, concurrency 2, prefetch 1, acks_late) on Redis, PostgreSQL; the three"
        f" tasks on the same worker, queue and tables. {COMMANDS} fresh commands per variant"
        " per round, timed from the first publish to the last committed ledger row, after a"
        " warm-up of each; the variants run in an order rotated per round. `evidence` is the"
        " plain task plus the inbox row alone (a plain `INSERT ... VALUES ... ON CONFLICT DO"
        " NOTHING` of its six columns into an inbox table of its own, in the same"
        " transaction; no claim logic, no result, no inboxguard Python): the floor the"
        " targets count from, since no guard that writes the evidence the guarantees need"
        " can cost less. Ratios are throughputs within a round: median of the per-round"
        f" ratios (min-max). The evidence row alone runs at {floor} of the plain task's"
        f" throughput; the guarded task at {over_floor} of the evidence row's. Target:"
        f" inbox/plain >= {TARGET:.2f} ({'met' if target.met else '**missed**'})."
        + (
            f" The evidence row alone is below the target (median {floor.median:.2f}): no guard"
            " that writes the evidence can reach it on this setup, and inbox/evidence is"
            " the figure the guard's own cost is read from."
            if floor.median < TARGET
            else ""
        )
        + "\n\n"
        + table(["task", "median tasks/s", "per round", "/ plain", "/ evidence row"], rows)
    )
    write_section(
        "celery",
        "Celery adapter: end-to-end throughput",
        body,
        load=load,
        rounds=n_rounds,
    )
    print(f"elapsed {time.monotonic() - began:.0f}s")


def _rates(per_round: list[dict[str, float]], variant: str) -> list[str]:
    values = [r[variant] for r in per_round]
    return [f"{statistics.median(values):.0f}", " / ".join(f"{v:.0f}" for v in values)]


if __name__ == "__main__":
    main()
