"""Purge on PostgreSQL while four worker processes keep claiming.

Seeds ROWS expired evidence rows, then runs four claiming processes for a
baseline phase without purge, then purges (batch 1000) while they keep
claiming, then a second baseline phase. Reports rows/s purged and the claim
latency p50/p99 during the purge against the baseline of the same run. Also
measures the stored bytes per evidence row (table + indexes), the figure
behind the sizing formula of docs/retention.md.

    python -m benchmarks purge            # ROWS=1_000_000 by default
    BENCH_PURGE_ROWS=200000 python -m benchmarks purge
"""

from __future__ import annotations

import datetime as dt
import multiprocessing as mp
import os
import statistics
import tempfile
import time
import uuid

from sqlalchemy import create_engine, text

import inboxguard
from benchmarks._report import table, write_section

ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
ROWS = int(os.environ.get("BENCH_PURGE_ROWS", "1000000"))
WORKERS = 4
BASELINE_SECONDS = 15.0
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


ALONE_ROWS = 50_000
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


def _alone_rates(pg_url: str, tmp: str) -> list[tuple[str, str]]:
    db = f"bench_purge_{uuid.uuid4().hex[:8]}"
    admin = create_engine(f"{MYSQL_ADMIN}/")
    with admin.begin() as conn:
        conn.execute(text(f"CREATE DATABASE `{db}`"))
    try:
        urls = [("PostgreSQL", pg_url), ("MariaDB", f"{MYSQL_ADMIN}/{db}"), ("SQLite", tmp)]
        return [(name, f"{_alone(url):,.0f}") for name, url in urls]
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS `{db}`"))
        admin.dispose()


def main() -> None:
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
        seed_seconds = _seed(engine, inbox, ROWS)
        print(f"seeded {ROWS} expired rows in {seed_seconds:.1f}s", flush=True)
        procs = [ctx.Process(target=_worker, args=(url, n, stop, out)) for n in range(WORKERS)]
        for proc in procs:
            proc.start()
        time.sleep(3.0)  # let the workers connect and warm up (excluded from both phases)
        base_start = time.monotonic()
        time.sleep(BASELINE_SECONDS)
        purge_start = time.monotonic()
        report = inbox.purge(batch_size=BATCH)
        purge_end = time.monotonic()
        time.sleep(BASELINE_SECONDS)  # a second baseline after, against drift of the machine
        after_end = time.monotonic()
        stop.set()
        samples = [s for _ in procs for s in out.get(timeout=120)]
        for proc in procs:
            proc.join(timeout=60)
        print(report.summary(), flush=True)
        sizes = _bytes_per_row(engine, inbox)
        with tempfile.TemporaryDirectory() as tmp:
            alone = _alone_rates(url, f"sqlite:///{tmp}/alone.db")
    finally:
        stop.set()
        for proc in procs:
            if proc.is_alive():
                proc.kill()
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()
    base = [
        lat
        for start, lat in samples
        if base_start <= start < purge_start or purge_end <= start < after_end
    ]
    during = [lat for start, lat in samples if purge_start <= start < purge_end]
    b50, b99 = _quantiles(base)
    d50, d99 = _quantiles(during)
    rate = report.deleted / (purge_end - purge_start)
    rows = [
        ("baseline (no purge)", len(base), f"{b50:.2f}", f"{b99:.2f}", "1.00"),
        ("during purge", len(during), f"{d50:.2f}", f"{d99:.2f}", f"{d99 / b99:.2f}"),
    ]
    body = (
        f"{ROWS:,} expired rows on PostgreSQL, purged in batches of {BATCH} while"
        f" {WORKERS} worker processes claim fresh commands (one transaction each)."
        f" Purge: **{report.deleted:,} rows in {purge_end - purge_start:.1f}s ="
        f" {rate:,.0f} rows/s** ({report.batches} batches). Baseline: the same workers"
        f" for {BASELINE_SECONDS:.0f}s just before and {BASELINE_SECONDS:.0f}s just after"
        " the purge.\n\n"
        + table(["phase", "claims", "p50 ms", "p99 ms", "p99 / baseline p99"], rows)
        + "\n\nStored size per evidence row (table + primary key + expiry indexes,"
        " 100,000 rows, consumer `billing`, UUID command IDs, after VACUUM):\n\n"
        + table(["row", "bytes per row"], [(label, f"{size:.0f}") for label, size in sizes])
        + f"\n\nPurge alone ({ALONE_ROWS:,} expired rows, batches of {BATCH}, no workers),"
        " per database. MariaDB deletes each picked row by its full primary key (see"
        " docs/retention.md), hence its lower rate:\n\n" + table(["database", "rows/s"], alone)
    )
    write_section("purge", "Purge while workers claim (PostgreSQL)", body)


if __name__ == "__main__":
    main()
