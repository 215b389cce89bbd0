"""End-to-end throughput of the reference Celery task, with and without the inbox.

One real ``celery worker`` (prefork, concurrency 2, Redis broker, PostgreSQL)
serves both tasks with the same settings: ``reference.apply_transfer`` (the
guarded one) and ``reference.apply_transfer_plain`` (the same body in a plain
transaction). Rounds alternate between the two; each round publishes fresh
commands and is timed from the first publish until the last ledger row is
committed.
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

from benchmarks._report import table, write_section
from integrations.celery import business
from integrations.celery.producer import commands, publish
from integrations.celery.settings import Settings, create_app

REPO = Path(__file__).resolve().parent.parent
PG_ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
REDIS_URL = os.environ.get("INBOXGUARD_REDIS_URL", "redis://127.0.0.1:6379/0")
COMMANDS = int(os.environ.get("BENCH_CELERY_COMMANDS", "1000"))
ROUNDS = int(os.environ.get("BENCH_CELERY_ROUNDS", "3"))


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
    rates: dict[bool, list[float]] = {True: [], False: []}
    try:
        for plain in (True, False):  # warm-up: imports, connections, first statements
            _round(app, settings, engine, ledger, plain=plain, tag=f"warm{plain}")
        for n in range(ROUNDS):
            for plain in (True, False):
                rate = _round(app, settings, engine, ledger, plain=plain, tag=f"r{n}{plain}")
                rates[plain].append(rate)
                print(f"round {n} {'plain' if plain else 'inbox'}: {rate:.0f} tasks/s", flush=True)
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
    load = os.getloadavg()[0]
    plain_rate = statistics.median(rates[True])
    inbox_rate = statistics.median(rates[False])
    spread = {k: " / ".join(f"{r:.0f}" for r in v) for k, v in rates.items()}
    rows = [
        ["plain transaction (baseline)", f"{plain_rate:.0f}", spread[True], "1.00"],
        ["`inbox_task` (claim + result in the same transaction)", f"{inbox_rate:.0f}",
         spread[False], f"{inbox_rate / plain_rate:.2f}"],
    ]  # fmt: skip
    body = (
        f"Reference task `apply_transfer` (ledger insert + balance update), one `celery worker`"
        f" (prefork, concurrency 2, prefetch 1, acks_late) on Redis, PostgreSQL;"
        f" {COMMANDS} fresh commands per round, median of {ROUNDS} alternating rounds, timed"
        " from the first publish to the last committed ledger row. Target ratio: >= 0.85."
        f" Load average at the end of the run: {load:.1f} (the machine is shared; rounds"
        " vary with it, which is why they alternate).\n\n"
        + table(["task", "median tasks/s", "rounds", "ratio"], rows)
    )
    write_section("celery", "Celery adapter: end-to-end throughput", body)


if __name__ == "__main__":
    main()
