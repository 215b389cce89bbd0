"""Purge on PostgreSQL while four worker processes keep claiming.

Four claiming processes run throughout. Each round seeds ROWS expired
evidence rows, then has a baseline window without purge, purges (batch 1000)
while the workers keep claiming, then a second baseline window. Reports rows/s
purged and the claim latency p50/p99 during the purge against the baseline of
the same round (median of per-round ratios, min-max), and records the target
(p99 during <= 1.5x without). Also measures the stored bytes per evidence row
(table + indexes), the figure behind the sizing formula of docs/retention.md,
and the purge rate alone on each database.

    python -m benchmarks purge            # 5 rounds of 250,000 rows by default
    BENCH_ROUNDS=1 BENCH_PURGE_ROWS=20000 python -m benchmarks purge   # a smoke run

The partitioned purge at 10 million rows is ``python -m benchmarks partitions``.
"""

from __future__ import annotations

import datetime as dt
import multiprocessing as mp
import os
import statistics
import tempfile
import time
import uuid
from typing import Any

from sqlalchemy import create_engine, text

import inboxguard
from benchmarks._harness import Load, Target, median, ratio, record, rounds, run_rounds
from benchmarks._report import table, write_section

ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
ROWS = int(os.environ.get("BENCH_PURGE_ROWS", "250000"))
WORKERS = 4
BASELINE_SECONDS = float(os.environ.get("BENCH_PURGE_BASELINE", "6"))
BATCH = 1000
PREFIX = "benchpurge_"


def _worker(url: str, n: int, stop: object, out: object) -> None:
    """Claim fresh commands until ``stop`` is set; send (start, latency) pairs."""
    engine = create_engine(url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=30), table_prefix=PREFIX)
    samples = []
    i = 0
    while not stop.is_set():  # type: ignore[attr-defined]
        i += 1
        started = time.monotonic()
        with (
            engine.begin() as conn,
            inbox.guard(conn, consumer="live", command_id=f"w{n}-{i}", payload={"n": i}) as entry,
        ):
            entry.result = {"ok": True}
        samples.append((started, time.monotonic() - started))
    engine.dispose()
    out.put(samples)  # type: ignore[attr-defined]


def _quantiles(latencies: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(latencies, n=100)
    return cuts[49] * 1000, cuts[98] * 1000


def _seed(engine: object, inbox: inboxguard.Inbox, rows: int) -> float:
    name = inbox.tables.inbox.name
    started = time.perf_counter()
    with engine.begin() as conn:  # type: ignore[attr-defined]
        conn.execute(
            text(
                f"INSERT INTO {name} (consumer, command_id, digest, result, processed_at,"
                " expires_at, result_expires_at)"
                " SELECT 'seed', md5(g::text), 'sha256:' || repeat('0', 64), NULL,"
                " (now() AT TIME ZONE 'utc') - interval '40 days',"
                " (now() AT TIME ZONE 'utc') - interval '10 days' - g * interval '1 ms', NULL"
                " FROM generate_series(1, :rows) AS g"
            ),
            {"rows": rows},
        )
        conn.execute(text(f"ANALYZE {name}"))
    return time.perf_counter() - started


def _bytes_per_row(engine: object, inbox: inboxguard.Inbox) -> list[tuple[str, float]]:
    """Table + index bytes per row for 100,000 typical rows, with and without a result."""
    name = inbox.tables.inbox.name
    figures = []
    kinds = (("result dropped (NULL)", None), ("small JSON result", '{"ok":true}'))
    for label, result in kinds:
        with engine.begin() as conn:  # type: ignore[attr-defined]
            conn.execute(text(f"TRUNCATE {name}"))
            conn.execute(
                text(
                    f"INSERT INTO {name} (consumer, command_id, digest, result, processed_at,"
                    " expires_at, result_expires_at)"
                    " SELECT 'billing', gen_random_uuid()::text,"
                    " 'sha256:' || encode(sha256(g::text::bytea), 'hex'),"
                    " :result, now() AT TIME ZONE 'utc',"
                    " (now() AT TIME ZONE 'utc') + interval '62 days',"
                    " (now() AT TIME ZONE 'utc') + interval '7 days'"
                    " FROM generate_series(1, 100000) AS g"
                ),
                {"result": result},
            )
        auto = engine.execution_options(isolation_level="AUTOCOMMIT")  # type: ignore[attr-defined]
        with auto.connect() as conn:
            conn.execute(text(f"VACUUM ANALYZE {name}"))
            size = conn.execute(text(f"SELECT pg_total_relation_size('{name}')")).scalar_one()
        figures.append((label, size / 100000))
    return figures


ALONE_ROWS = int(os.environ.get("BENCH_PURGE_ALONE_ROWS", "20000"))
MYSQL_ADMIN = os.environ.get("INBOXGUARD_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306")


def _alone(url: str) -> float:
    """Rows/s of a purge of ALONE_ROWS expired rows with nothing else running."""
    engine = create_engine(url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=30), table_prefix="benchalone_")
    inbox.create_schema()
    try:
        now = dt.datetime.now(dt.UTC)
        rows = [
            {
                "consumer": "seed",
                "command_id": uuid.uuid4().hex,
                "digest": "sha256:" + "0" * 64,
                "processed_at": now - dt.timedelta(days=40),
                "expires_at": now - dt.timedelta(days=10, milliseconds=i),
            }
            for i in range(ALONE_ROWS)
        ]
        with engine.begin() as conn:
            for start in range(0, ALONE_ROWS, 5000):
                conn.execute(inbox.tables.inbox.insert(), rows[start : start + 5000])
        report = inbox.purge(batch_size=BATCH)
        return report.deleted / report.seconds
    finally:
        inbox.drop_schema()
        engine.dispose()


ALONE = ("PostgreSQL", "MariaDB", "SQLite")


def _alone_rates(pg_url: str, tmp: str, n_rounds: int) -> list[tuple[str, str]]:
    db = f"bench_purge_{uuid.uuid4().hex[:8]}"
    admin = create_engine(f"{MYSQL_ADMIN}/")
    with admin.begin() as conn:
        conn.execute(text(f"CREATE DATABASE `{db}`"))
    try:
        urls = {"PostgreSQL": pg_url, "MariaDB": f"{MYSQL_ADMIN}/{db}", "SQLite": tmp}
        per_round = run_rounds(
            ALONE, lambda order, _i: {name: _alone(urls[name]) for name in order}, n_rounds
        )
        return [(name, _spread([r[name] for r in per_round])) for name in ALONE]
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS `{db}`"))
        admin.dispose()


def _spread(values: list[float]) -> str:
    """Median (min-max) of per-round rates, as whole numbers."""
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def _window(samples: list[tuple[float, float]], start: float, end: float) -> list[float]:
    return [lat for began, lat in samples if start <= began < end]


def _purge_round(engine: Any, inbox: inboxguard.Inbox) -> dict[str, float]:
    """Seed, a baseline window, the purge, a second baseline window: the marks."""
    seed_seconds = _seed(engine, inbox, ROWS)
    time.sleep(1.0)  # the seed's commit settles (its time is in no window)
    before = time.monotonic()
    time.sleep(BASELINE_SECONDS)
    purge_start = time.monotonic()
    report = inbox.purge(batch_size=BATCH)
    purge_end = time.monotonic()
    time.sleep(BASELINE_SECONDS)  # a second baseline after, against drift of the machine
    after = time.monotonic()
    print(f"  seeded in {seed_seconds:.1f}s; {report.summary()}", flush=True)
    return {
        "before": before,
        "purge_start": purge_start,
        "purge_end": purge_end,
        "after": after,
        "deleted": report.deleted,
        "batches": report.batches,
    }


def _phases(samples: list[tuple[float, float]], marks: dict[str, float]) -> dict[str, float]:
    """One round's figures: claim p50/p99 with and without the purge, and its rate."""
    base = _window(samples, marks["before"], marks["purge_start"]) + _window(
        samples, marks["purge_end"], marks["after"]
    )
    during = _window(samples, marks["purge_start"], marks["purge_end"])
    b50, b99 = _quantiles(base)
    d50, d99 = _quantiles(during)
    seconds = marks["purge_end"] - marks["purge_start"]
    return {
        "baseline p50": b50,
        "baseline p99": b99,
        "during p50": d50,
        "during p99": d99,
        "baseline claims": len(base),
        "during claims": len(during),
        "rate": marks["deleted"] / seconds,
        "seconds": seconds,
        "batches": marks["batches"],
    }


def main() -> None:
    n_rounds = rounds()
    load = Load()
    began = time.monotonic()
    db = f"bench_purge_{uuid.uuid4().hex[:8]}"
    admin = create_engine(f"{ADMIN}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{db}"'))
    url = f"{ADMIN}/{db}"
    engine = create_engine(url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=30), table_prefix=PREFIX)
    inbox.create_schema()
    ctx = mp.get_context("spawn")
    stop, out = ctx.Event(), ctx.Queue()
    procs = []
    try:
        procs = [ctx.Process(target=_worker, args=(url, n, stop, out)) for n in range(WORKERS)]
        for proc in procs:
            proc.start()
        time.sleep(3.0)  # let the workers connect and warm up (excluded from every window)
        print("purge while workers claim:", flush=True)
        marks = []
        for i in range(n_rounds):
            marks.append(_purge_round(engine, inbox))
            print(f"  round {i + 1}/{n_rounds} done", flush=True)
        stop.set()
        samples = [s for _ in procs for s in out.get(timeout=120)]
        for proc in procs:
            proc.join(timeout=60)
        sizes = _bytes_per_row(engine, inbox)
        print("purge alone:", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            alone = _alone_rates(url, f"sqlite:///{tmp}/alone.db", n_rounds)
    finally:
        stop.set()
        for proc in procs:
            if proc.is_alive():
                proc.kill()
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()
    load.stop()
    per_round = [_phases(samples, m) for m in marks]
    p99 = ratio(per_round, "during p99", "baseline p99")
    p50 = ratio(per_round, "during p50", "baseline p50")
    rows = [
        (
            "baseline (no purge)",
            f"{median(per_round, 'baseline claims'):,.0f}",
            f"{median(per_round, 'baseline p50'):.2f}",
            f"{median(per_round, 'baseline p99'):.2f}",
            "1.00",
            "1.00",
        ),
        (
            "during purge",
            f"{median(per_round, 'during claims'):,.0f}",
            f"{median(per_round, 'during p50'):.2f}",
            f"{median(per_round, 'during p99'):.2f}",
            str(p50),
            str(p99),
        ),
    ]
    label = f"claim p99 during a {ROWS:,}-row purge / without (PostgreSQL, {WORKERS} workers)"
    target = Target("purge", label, 1.5, "lower", p99)
    body = (
        f"Each round seeds {ROWS:,} expired rows on PostgreSQL and purges them in batches"
        f" of {BATCH} while {WORKERS} worker processes claim fresh commands (one"
        " transaction each); the baseline is the same workers in the"
        f" {BASELINE_SECONDS:.0f} s just before and just after that round's purge. Claim"
        " latencies are taken per round; the table shows medians over the rounds, and"
        " each ratio (during / baseline) is taken within a round, median (min-max)"
        f" shown. Purge rate: **{_spread([r['rate'] for r in per_round])} rows/s**"
        f" ({median(per_round, 'seconds'):.1f} s and"
        f" {median(per_round, 'batches'):,.0f} batches a round, median). Target: claim"
        f" p99 during the purge <= 1.5x without: {'met' if target.met else '**missed**'}."
        "\n\n"
        + table(
            [
                "phase",
                "claims a round",
                "p50 ms",
                "p99 ms",
                "p50 / baseline p50",
                "p99 / baseline p99",
            ],
            rows,
        )
        + "\n\nStored size per evidence row (table + primary key + expiry indexes,"
        " 100,000 rows, consumer `billing`, UUID command IDs, after VACUUM; a size, not"
        " a timing, so measured once):\n\n"
        + table(["row", "bytes per row"], [(label, f"{size:.0f}") for label, size in sizes])
        + f"\n\nPurge alone ({ALONE_ROWS:,} expired rows, batches of {BATCH}, no workers),"
        " per database, the databases in a rotated order each round, median (min-max) of"
        " the rounds. MariaDB deletes each picked row by its full primary key (see"
        " docs/retention.md), hence its lower rate:\n\n" + table(["database", "rows/s"], alone)
    )
    write_section(
        "purge", "Purge while workers claim (PostgreSQL)", body, load=load, rounds=n_rounds
    )
    record("purge", [target], load, n_rounds)
    print(f"elapsed {time.monotonic() - began:.0f}s")


if __name__ == "__main__":
    main()
