"""Async guard overhead: the same small mutation bare and inside ``inbox.guard_async``.

asyncpg through SQLAlchemy's ``AsyncConnection``. The mutation is one UPDATE and
one INSERT in a transaction. Each round runs, with N consumers as concurrent
tasks of one event loop (each on its own pooled connection, as an aio-pika
consumer with a prefetch of N would):

- ``bare``: the mutation alone;
- ``evidence``: the mutation plus the inbox row alone, a plain ``INSERT ...
  VALUES ... ON CONFLICT DO NOTHING`` of its six columns
  (:func:`benchmarks.bench_inbox.evidence_statement`) into an inbox table of
  its own, on business tables of its own (its key and expiry index, no claim
  logic, no inboxguard Python): the floor the targets count from (issue 37),
  since no guard that writes the evidence the guarantees need can cost less;
- ``guarded``: the mutation inside ``inbox.guard_async`` (fresh command IDs);
- ``duplicate``: ``inbox.guard_async`` on already-committed IDs (those the
  guarded mode committed in the previous chunk, the warm-up's before the
  first).

``bare``, ``guarded`` and ``duplicate`` share one set of tables (the
duplicates are the guarded mode's IDs); ``evidence`` writes its own, created
empty for the round and warmed up like the others. Within a round the four
modes alternate in chunks of ``CHUNK`` messages, in
an order shuffled afresh for every chunk
(:func:`benchmarks._harness.shuffled_orders`), so drift of the shared machine
weighs on each alike and no mode always runs first or after the same other;
ratios are taken within a round and the median of the per-round ratios is
reported with its range, the targets recorded with
:func:`benchmarks._harness.record`. Run with ``python -m benchmarks async``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import statistics
import sys
import time
import uuid

from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from benchmarks import _harness
from benchmarks._harness import Load, Target
from benchmarks._report import table, write_section
from benchmarks.bench_inbox import evidence_row, evidence_statement
from inboxguard import Inbox
from tests.helpers import business_tables

PG_ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
MESSAGES = int(os.environ.get("BENCH_MESSAGES", "600"))
WARMUP = 300
#: Messages per consumer per mode in one interleaved chunk.
CHUNK = 50
MODES = ("bare", "evidence", "guarded", "duplicate")
#: guarded / bare at most this, by number of concurrent consumers.
BOUNDS = {1: 1.30, 4: 1.40}


async def _consume(
    engine: AsyncEngine, inbox: Inbox, mode: str, ids: list[str], worker: int
) -> None:
    _, accounts, ledger = business_tables(inbox.table_prefix)
    update = accounts.update().where(accounts.c.id == worker)
    for cid in ids:
        async with engine.connect() as conn, conn.begin():
            if mode == "evidence":
                await conn.execute(evidence_statement(inbox), evidence_row(cid))
            if mode in {"bare", "evidence"}:
                await conn.execute(update.values(balance=accounts.c.balance + 1))
                await conn.execute(ledger.insert().values(command_id=cid, amount=1))
                continue
            async with inbox.guard_async(
                conn, consumer="bench", command_id=cid, payload={"id": cid}
            ) as entry:
                if not entry.duplicate:
                    await conn.execute(update.values(balance=accounts.c.balance + 1))
                    await conn.execute(ledger.insert().values(command_id=cid, amount=1))


async def _round(url: str, prefix: str, workers: int, i: int) -> dict[str, float]:
    """Round ``i``: modes interleaved in chunks, so drift weighs on each alike."""
    tag = f"r{i}"
    orders = _harness.shuffled_orders(MODES, -(-MESSAGES // CHUNK), i)
    engine = create_async_engine(url, pool_size=workers, max_overflow=0)
    sync_url = "postgresql+psycopg://" + url.split("://", 1)[1]  # the Inbox needs a sync driver
    sync_engine = create_engine(sync_url)
    inbox = Inbox(sync_engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inboxes = dict.fromkeys(MODES, inbox)
    inboxes["evidence"] = Inbox(
        sync_engine, retention=dt.timedelta(days=1), table_prefix=_evidence_prefix(prefix)
    )
    try:
        warm = [[f"{tag}-warm{w}-{i}" for i in range(WARMUP)] for w in range(workers)]
        for mode in ("guarded", "bare", "evidence"):
            await asyncio.gather(
                *(_consume(engine, inboxes[mode], mode, warm[w], w) for w in range(workers))
            )
        timings = dict.fromkeys(MODES, 0.0)
        previous = [warm[w][:CHUNK] for w in range(workers)]  # committed: duplicates
        for k, start in enumerate(range(0, MESSAGES, CHUNK)):
            fresh = [
                [f"{tag}-w{w}-{i}" for i in range(start, start + CHUNK)] for w in range(workers)
            ]
            chunks = {
                "bare": [[f"{c}-bare" for c in fresh[w]] for w in range(workers)],
                "evidence": fresh,
                "guarded": fresh,
                "duplicate": previous,
            }
            for mode in orders[k]:
                began = time.perf_counter()
                await asyncio.gather(
                    *(
                        _consume(engine, inboxes[mode], mode, chunks[mode][w], w)
                        for w in range(workers)
                    )
                )
                timings[mode] += time.perf_counter() - began
            previous = fresh
        return timings
    finally:
        await engine.dispose()
        sync_engine.dispose()


def _evidence_prefix(prefix: str) -> str:
    """The evidence mode's tables: an inbox and business tables of its own."""
    return f"{prefix}evi_"


def _measure(sync_url: str, async_url: str, workers: int, n_rounds: int) -> list[dict[str, float]]:
    def one(_order: list[str], i: int) -> dict[str, float]:
        prefix = f"a{uuid.uuid4().hex[:8]}_"
        engine = create_engine(sync_url)
        for tables in (prefix, _evidence_prefix(prefix)):
            Inbox(engine, retention=dt.timedelta(days=1), table_prefix=tables).create_schema()
            md, accounts, _ = business_tables(tables)
            md.create_all(engine)
            with engine.begin() as conn:
                conn.execute(accounts.insert(), [{"id": w, "balance": 0} for w in range(workers)])
        engine.dispose()
        return asyncio.run(_round(async_url, prefix, workers, i))

    print(f"-- asyncpg, {workers} consumer(s)", flush=True)
    return _harness.run_rounds(MODES, one, n_rounds)


def _row(workers: int, rounds: list[dict[str, float]]) -> list[object]:
    total = MESSAGES * workers
    return [
        "PostgreSQL (asyncpg)",
        workers,
        f"{statistics.median(total / r['bare'] for r in rounds):,.0f}",
        _harness.ratio(rounds, "guarded", "bare"),
        _harness.ratio(rounds, "evidence", "bare"),
        _harness.ratio(rounds, "guarded", "evidence"),
        _harness.ratio(rounds, "duplicate", "bare"),
    ]


def main() -> None:
    """Measure asyncpg with 1 and 4 concurrent consumers."""
    sys.path.insert(0, os.getcwd())
    n_rounds = _harness.rounds()
    load = Load()
    began = time.perf_counter()
    db = f"bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(f"{PG_ADMIN}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{db}"'))
    sync_url = f"{PG_ADMIN}/{db}"
    async_url = "postgresql+asyncpg://" + sync_url.split("://", 1)[1]
    try:
        measured = {w: _measure(sync_url, async_url, w, n_rounds) for w in (1, 4)}
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()
    load.stop()
    targets = [
        Target(
            "async",
            f"async guard / bare, asyncpg, {w} consumer(s)",
            BOUNDS[w],
            "lower",
            _harness.ratio(rounds, "guarded", "bare"),
            floor=_harness.ratio(rounds, "evidence", "bare"),
            floor_variant="evidence row / bare",
        )
        for w, rounds in measured.items()
    ]
    _harness.record("async", targets, load, n_rounds)
    rows = [_row(w, rounds) for w, rounds in measured.items()]
    verdicts = "; ".join(
        f"{t.label}: {t.measured.median:.2f} against <= {t.bound:.2f},"
        f" {'met' if t.met else 'missed'}"
        for t in targets
    )
    header = [
        "database",
        "concurrent consumers",
        "bare msg/s",
        "guarded / bare time",
        "evidence row / bare time",
        "guarded / evidence row time",
        "verified duplicate / bare fresh time",
    ]
    body = (
        f"{MESSAGES:,} messages per consumer per mode after a {WARMUP}-message warm-up,"
        f" the modes alternating in chunks of {CHUNK} in an order shuffled for every chunk,"
        f" {n_rounds} rounds; each ratio is taken within a round, median (min-max) shown."
        " Consumers are tasks of one event loop, each message one transaction on an"
        " `AsyncConnection`: `bare` runs an UPDATE and an INSERT; `guarded` runs the same"
        " inside `inbox.guard_async` with a fresh command ID; `duplicate` runs"
        " `inbox.guard_async` on an already-committed ID (the mutation is skipped);"
        " `evidence` runs the bare mutation plus the inbox row alone (its six columns into"
        " an inbox table of its own, a plain `INSERT ... VALUES ... ON CONFLICT DO NOTHING`:"
        " its key and expiry index, no claim logic), the floor no guard that writes the"
        " evidence the guarantees need can go below; `evidence` writes tables of its own,"
        " the other modes share one set. So guarded/bare can go no lower than evidence"
        " row/bare, and guarded/evidence row is what the guard costs beyond that floor."
        f" Targets: guarded/bare <= {BOUNDS[1]:.2f} (1 consumer) and <= {BOUNDS[4]:.2f}"
        f" (4 consumers). Measured: {verdicts}.\n\n"
        + table(header, rows)
        + f"\n\nThe run took {time.perf_counter() - began:.0f} s."
    )
    write_section(
        "async",
        "Async guard overhead (`benchmarks/bench_async.py`)",
        body,
        load=load,
        rounds=n_rounds,
    )


if __name__ == "__main__":
    main()
