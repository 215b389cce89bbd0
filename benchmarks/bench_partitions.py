"""Partitioned evidence (``Inbox(partitioning="daily")``) against the plain
table, on PostgreSQL: purge time, claim p99 during the purge, table plus
index size, and the cost of a duplicate lookup as partitions grow.

Each variant's table is loaded once with ROWS evidence rows (``INSERT ...
SELECT generate_series``, not through the guard) whose expiries spread over
ten days. Each round purges one more day, plain (row by row, batches of
1000) and partitioned (one partition detached and dropped), in rotated order,
while two threads claim fresh commands on the same table.

    python -m benchmarks partitions                       # 10,000,000 rows, 5 rounds
    BENCH_ROUNDS=1 BENCH_PARTITION_ROWS=200000 python -m benchmarks partitions  # smoke
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

import inboxguard
from benchmarks._harness import Load, of_values, rotate, rounds
from benchmarks._report import table, write_section

ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
ROWS = int(os.environ.get("BENCH_PARTITION_ROWS", "10000000"))
DAYS = 10
HORIZON = dt.timedelta(days=DAYS)
LOOKUPS = 300
VARIANTS = ("plain", "partitioned")


def _inbox(engine: Engine, variant: str, prefix: str, at: dt.datetime) -> inboxguard.Inbox:
    return inboxguard.Inbox(
        engine,
        retention=HORIZON,
        table_prefix=prefix,
        clock=lambda: at,
        partitioning="daily" if variant == "partitioned" else None,
    )


def _load(engine: Engine, inbox: inboxguard.Inbox, rows: int, t0: dt.datetime) -> float:
    started = time.perf_counter()
    step = max(1, rows // 10)
    with engine.begin() as conn:
        for lo in range(0, rows, step):
            conn.execute(
                text(
                    f'INSERT INTO "{inbox.tables.inbox.name}" (consumer, command_id, digest,'
                    " result, processed_at, expires_at, result_expires_at)"
                    " SELECT 'billing', md5(g::text), 'sha256:' || md5(g::text) || md5(g::text),"
                    " NULL, :t0 - interval '1 day',"
                    " :t0 + (g::double precision / CAST(:rows AS double precision))"
                    " * interval '10 days', NULL"
                    " FROM generate_series(CAST(:lo AS bigint), CAST(:hi AS bigint)) AS g"
                ),
                {
                    "t0": t0.replace(tzinfo=None),
                    "rows": rows,
                    "lo": lo + 1,
                    "hi": min(rows, lo + step),
                },
            )
    auto = engine.execution_options(isolation_level="AUTOCOMMIT")
    with auto.connect() as conn:
        conn.execute(text(f'VACUUM ANALYZE "{inbox.tables.inbox.name}"'))
    return time.perf_counter() - started


def _size(engine: Engine, inbox: inboxguard.Inbox) -> int:
    name = inbox.tables.inbox.name
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT pg_total_relation_size(to_regclass(:n)) + coalesce((SELECT"
                    " sum(pg_total_relation_size(inhrelid)) FROM pg_inherits"
                    " WHERE inhparent = to_regclass(:n)), 0)"
                ),
                {"n": f'"{name}"'},
            ).scalar_one()
        )


def _claims(engine: Engine, inbox: inboxguard.Inbox, stop: threading.Event, out: list) -> None:  # type: ignore[type-arg]
    i = 0
    tag = uuid.uuid4().hex[:6]
    while not stop.is_set():
        i += 1
        started = time.monotonic()
        with (
            engine.begin() as conn,
            inbox.guard(conn, consumer="live", command_id=f"{tag}-{i}", payload={"n": i}),
        ):
            pass
        out.append((started, time.monotonic() - started))


def _purge_round(engine: Engine, inbox: inboxguard.Inbox, now: dt.datetime) -> dict[str, float]:
    stop = threading.Event()
    samples: list[tuple[float, float]] = []
    threads = [
        threading.Thread(target=_claims, args=(engine, inbox, stop, samples)) for _ in range(2)
    ]
    for t in threads:
        t.start()
    time.sleep(1.0)
    start = time.monotonic()
    report = inbox.purge(now=now)
    end = time.monotonic()
    time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join()
    during = sorted(lat for s, lat in samples if start <= s <= end)
    p99 = during[int(0.99 * (len(during) - 1))] if during else 0.0
    return {
        "seconds": end - start,
        "p99": p99 * 1000,
        "claims": len(during),
        "dropped": len(report.partitions_dropped),
        "deleted": report.deleted,
    }


def _lookup_cost(engine: Engine, n_rounds: int) -> list[list[str]]:
    """Per-duplicate time on the plain table and at 30 and 365 daily
    partitions (from today to 3 days past a claim's expiry, plus DEFAULT)."""
    shapes = {"plain": (None, 30), "30 partitions": ("daily", 26), "365 partitions": ("daily", 361)}
    boxes = {}
    for label, (part, days) in shapes.items():
        prefix = f"bl{uuid.uuid4().hex[:6]}_"
        box = inboxguard.Inbox(
            engine, retention=dt.timedelta(days=days), table_prefix=prefix, partitioning=part
        )  # type: ignore[arg-type]
        box.create_schema()
        for i in range(200):
            with (
                engine.begin() as conn,
                box.guard(conn, consumer="c", command_id=f"k{i}", payload=1),
            ):
                pass
        boxes[label] = box
    per_round: list[dict[str, float]] = []
    for r in range(n_rounds):
        got: dict[str, float] = {}
        for label in rotate(list(shapes), r):
            box = boxes[label]
            started = time.perf_counter()
            for i in range(LOOKUPS):
                with (
                    engine.begin() as conn,
                    box.guard(conn, consumer="c", command_id=f"k{i % 200}", payload=1),
                ):
                    pass
            got[label] = (time.perf_counter() - started) / LOOKUPS * 1e6
        per_round.append(got)
    for box in boxes.values():
        box.drop_schema()
    rows = []
    for label in shapes:
        ratio = of_values([r[label] / r["plain"] for r in per_round])
        rows.append([label, f"{statistics.median(r[label] for r in per_round):.0f}", str(ratio)])
    return rows


def main() -> None:
    began = time.monotonic()
    load = Load()
    n_rounds = rounds()
    rows = ROWS if "BENCH_PARTITION_ROWS" in os.environ or n_rounds >= 5 else 200_000
    db = f"bench_parts_{uuid.uuid4().hex[:8]}"
    admin = create_engine(f"{ADMIN}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{db}"'))
    engine = create_engine(f"{ADMIN}/{db}", pool_size=8)
    t0 = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    try:
        boxes = {v: _inbox(engine, v, f"bp{v[:2]}_", t0) for v in VARIANTS}
        for box in boxes.values():
            box.create_schema()
        # Both tables load at once (one connection each): the load is most of the run.
        with ThreadPoolExecutor(max_workers=len(boxes)) as pool:
            loads = {v: pool.submit(_load, engine, b, rows, t0) for v, b in boxes.items()}
            for variant, job in loads.items():
                print(f"{variant}: loaded {rows:,} rows in {job.result():.0f}s", flush=True)
        sizes = {v: _size(engine, b) for v, b in boxes.items()}
        live = {v: _inbox(engine, v, f"bp{v[:2]}_", dt.datetime.now(dt.UTC)) for v in VARIANTS}
        per_round: list[dict[str, dict[str, float]]] = []
        for r in range(n_rounds):
            got = {}
            for variant in rotate(list(VARIANTS), r):
                got[variant] = _purge_round(engine, live[variant], t0 + dt.timedelta(days=r + 1))
                print(f"round {r + 1} {variant}: {got[variant]}", flush=True)
            per_round.append(got)
        after = {v: _size(engine, b) for v, b in boxes.items()}
        lookups = _lookup_cost(engine, n_rounds)
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()
    load.stop()
    day = rows // DAYS
    speed = of_values([r["plain"]["seconds"] / r["partitioned"]["seconds"] for r in per_round])
    purge_rows = [
        [
            v,
            f"{statistics.median(r[v]['seconds'] for r in per_round):.2f}",
            f"{min(r[v]['seconds'] for r in per_round):.2f}-"
            f"{max(r[v]['seconds'] for r in per_round):.2f}",
            f"{statistics.median(r[v]['p99'] for r in per_round):.1f}",
            f"{sum(int(r[v]['claims']) for r in per_round)}",
            f"{sizes[v] / 2**20:,.0f}",
            f"{sizes[v] / rows:.0f}",
            f"{after[v] / 2**20:,.0f}",
        ]
        for v in VARIANTS
    ]
    body = (
        f"{rows:,} evidence rows per variant, expiries spread over {DAYS} days. Each round"
        f" purges one more day (about {day:,} rows): row by row in batches of 1000 (plain)"
        " or by detaching and dropping one daily partition (partitioned), while two"
        " threads claim fresh commands on the same table. Plain purge time /"
        f" partitioned purge time, median of per-round ratios: **{speed}**.\n\n"
        + table(
            [
                "variant",
                "purge s (median)",
                "purge s (min-max)",
                "claim p99 ms during purge (median)",
                "claims during purges",
                "MiB loaded",
                "bytes/row loaded",
                f"MiB after {n_rounds} purges",
            ],
            purge_rows,
        )
        + f"\n\nA duplicate's whole guard (claim, commit) against the number of partitions"
        f" ({LOOKUPS} duplicates of 200 stored commands per variant and round; no"
        " partition pruning, the lookup probes every partition's unique index):\n\n"
        + table(["table", "us per duplicate (median)", "vs plain"], lookups)
        + f"\n\nElapsed: {time.monotonic() - began:.0f}s."
    )
    write_section(
        "partitions",
        "Partitioned evidence: purge, size, lookups (PostgreSQL)",
        body,
        load=load,
        rounds=n_rounds,
    )
    print(f"elapsed {time.monotonic() - began:.0f}s")


if __name__ == "__main__":
    main()
