"""End-to-end throughput of the reference Celery task, with and without the inbox.

One real ``celery worker`` (prefork, concurrency 2, Redis broker, PostgreSQL)
serves both tasks with the same settings: ``reference.apply_transfer`` (the
guarded one) and ``reference.apply_transfer_plain`` (the same body in a plain
transaction), on the same queue, broker and tables. After a warm-up of each,
every round runs both variants in an order rotated per round
(``benchmarks._harness``); a variant's figure is fresh commands per second,
timed from the first publish until the last ledger row is committed. The
ratio is taken within a round; the median of the per-round ratios (min-max)
is reported and recorded as the target ``>= 0.90``.

``BENCH_ROUNDS`` (default 5) and ``BENCH_CELERY_COMMANDS`` (default 1000 a
variant a round) size the run; a default run takes about three minutes.
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
from integrations.celery.settings import Settings, create_app

REPO = Path(__file__).resolve().parent.parent
PG_ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
REDIS_URL = os.environ.get("INBOXGUARD_REDIS_URL", "redis://127.0.0.1:6379/0")
COMMANDS = int(os.environ.get("BENCH_CELERY_COMMANDS", "1000"))
VARIANTS = ("plain", "inbox")
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


def _round(app, settings, engine, ledger, *, plain: bool, tag: str) -> float:
    with engine.connect() as conn:
        before = conn.execute(select(func.count()).select_from(ledger)).scalar_one()
    target = before + COMMANDS

    def done() -> bool:
        with engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(ledger)).scalar_one() >= target

    start = time.perf_counter()
    publish(app, settings, commands(COMMANDS, prefix=tag), plain=plain)
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
    ledger = business.tables(settings.table_prefix).ledger
    app = create_app(settings, include_tasks=False)
    log = Path(tempfile.gettempdir()) / f"{queue}.log"
    worker = _start_worker(settings, log)

    def one_round(order: list[str], i: int) -> dict[str, float]:
        return {
            v: _round(app, settings, engine, ledger, plain=v == "plain", tag=f"r{i}{v}")
            for v in order
        }

    try:
        for variant in VARIANTS:  # warm-up: imports, connections, first statements
            _round(app, settings, engine, ledger, plain=variant == "plain", tag=f"warm{variant}")
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
    target = _harness.Target(
        benchmark="celery",
        label="Celery task, Redis, end to end: inbox / plain throughput",
        bound=TARGET,
        better="higher",
        measured=measured,
    )
    _harness.record("celery", [target], load, n_rounds)
    rows = [
        ["plain transaction (baseline)", *_rates(per_round, "plain"), "1.00"],
        ["`inbox_task` (claim + result in the same transaction)",
         *_rates(per_round, "inbox"), str(measured)],
    ]  # fmt: skip
    body = (
        "Reference task `apply_transfer` (ledger insert + balance update), one `celery worker`"
        " (prefork, concurrency 2, prefetch 1, acks_late) on Redis, PostgreSQL; both tasks"
        f" on the same worker, queue and tables. {COMMANDS} fresh commands per variant per"
        " round, timed from the first publish to the last committed ledger row, after a"
        " warm-up of each; the variants run in an order rotated per round. The ratio is"
        " the inbox task's throughput over the plain task's within a round: median of the"
        f" per-round ratios (min-max). Target: >= {TARGET:.2f}"
        f" ({'met' if target.met else '**missed**'}).\n\n"
        + table(["task", "median tasks/s", "per round", "throughput ratio"], rows)
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
