"""Inbox overhead: the same small mutation bare and inside ``inbox.guard``.

The mutation is one UPDATE and one INSERT in a transaction on a Core
connection. Each round runs, with N worker processes in parallel, every mode
on ``BENCH_MESSAGES`` messages per worker, the modes alternating in chunks of
``CHUNK`` messages in an order shuffled afresh for every chunk
(:func:`benchmarks._harness.shuffled_orders`), so a drift of the shared
machine (a checkpoint, another process) weighs on every mode alike and no
mode always runs after the same other; all workers run the
same mode's chunk at once (a barrier before and after each chunk):

- ``bare``: the mutation alone;
- ``floor``: the mutation plus one bare ``INSERT ... ON CONFLICT DO NOTHING``
  of the command ID into a one-column table: the cheapest any design that
  records the ID with one more statement can be;
- ``evidence``: the mutation plus the inbox row alone, a plain ``INSERT ...
  VALUES ... ON CONFLICT DO NOTHING`` of its six columns into an inbox table
  of its own (its key and expiry index, no claim logic, no inboxguard
  Python): the floor the targets count from (issue 37), since no guard that
  writes the evidence the guarantees need can cost less;
- ``guarded``: the mutation inside ``inbox.guard`` (fresh command IDs);
- ``unpipelined``: the same with the pipelines of G35 and G36 turned off
  (:func:`inboxguard.sql.pg_pipeline.usable` answering False, as it does
  behind ``prepare_threshold=None``): ``BEGIN; SAVEPOINT`` sent as one query
  before the claim, and the result store before ``RELEASE SAVEPOINT;
  COMMIT``, as from G32 until G35: the A/B that decides whether the
  pipelines pay on this machine;
- ``duplicate``: ``inbox.guard`` on IDs committed before the round's timed
  part (no mutation runs).

Every mode writes tables of its own, created empty for the round (its
business tables, its one-column table, its inbox) and warmed up with the same
number of messages, so no mode runs on a table another mode has grown,
whatever the order. The duplicate mode's inbox is filled with its IDs before
the timed part.

Each worker handles ``BENCH_MESSAGES`` messages per mode after a warm-up.
Ratios are taken within a round (the slowest worker's time per mode, summed
over its chunks) and
the median over rounds is reported with its range; the targets are recorded
with :func:`benchmarks._harness.record`. Run with
``python -m benchmarks inbox``.
"""

from __future__ import annotations

import datetime as dt
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

from benchmarks import _harness
from benchmarks._harness import Load, Target
from benchmarks._report import table, write_section
from inboxguard import Inbox
from inboxguard.sql import pg_pipeline
from tests.helpers import business_tables

PG_ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
MESSAGES = int(os.environ.get("BENCH_MESSAGES", "2000"))
WARMUP = 300
#: Messages per worker per mode in one interleaved chunk.
CHUNK = 50
MODES = ("bare", "floor", "evidence", "guarded", "unpipelined", "duplicate")
#: The modes that write an inbox of their own.
GUARDED = frozenset({"evidence", "guarded", "unpipelined", "duplicate"})
RETENTION = dt.timedelta(days=1)
#: Guard / evidence row at most this (1 and 4 workers; issue 37, the moonshot
#: 1.05); a verified duplicate at most DUP_BOUND of bare.
EVIDENCE_BOUND = 1.10
DUP_BOUND = 0.55


def _prefix(base: str, mode: str) -> str:
    return f"{base}{mode[:3]}_"


def _setup(url: str, base: str, workers: int) -> None:
    """Each mode's own tables, empty; the duplicate mode's inbox holds its IDs."""
    engine = create_engine(url)
    for mode in MODES:
        prefix = _prefix(base, mode)
        if mode in GUARDED:
            Inbox(engine, retention=RETENTION, table_prefix=prefix).create_schema()
        md, accounts, _ = business_tables(prefix)
        md.create_all(engine)
        with engine.begin() as conn:
            conn.execute(accounts.insert(), [{"id": i, "balance": 0} for i in range(workers)])
            conn.execute(text(f"CREATE TABLE {prefix}floor (command_id VARCHAR(255) PRIMARY KEY)"))
    engine.dispose()


def _run_mode(engine: Engine, inbox: Inbox, mode: str, ids: list[str], worker: int) -> None:
    if mode == "unpipelined":
        usable = pg_pipeline.usable  # a plain function, not a mock: no cost of its own
        pg_pipeline.usable = _never
        try:
            _run_messages(engine, inbox, "guarded", ids, worker)
        finally:
            pg_pipeline.usable = usable
        return
    _run_messages(engine, inbox, mode, ids, worker)


def _never(_dbapi: Any) -> bool:
    return False


def _run_messages(engine: Engine, inbox: Inbox, mode: str, ids: list[str], worker: int) -> None:
    _, accounts, ledger = business_tables(inbox.table_prefix)
    update = accounts.update().where(accounts.c.id == worker)
    floor = text(
        f"INSERT INTO {inbox.table_prefix}floor (command_id) VALUES (:cid) ON CONFLICT DO NOTHING"
    )
    for cid in ids:
        with engine.connect() as conn, conn.begin():
            if mode == "floor":
                conn.execute(floor, {"cid": cid})
            elif mode == "evidence":
                conn.execute(evidence_statement(inbox), evidence_row(cid))
            if mode in {"bare", "floor", "evidence"}:
                conn.execute(update.values(balance=accounts.c.balance + 1))
                conn.execute(ledger.insert().values(command_id=cid, amount=1))
                continue
            with inbox.guard(conn, consumer="bench", command_id=cid, payload={"id": cid}) as e:
                if not e.duplicate:
                    conn.execute(update.values(balance=accounts.c.balance + 1))
                    conn.execute(ledger.insert().values(command_id=cid, amount=1))


def evidence_statement(inbox: Inbox) -> Any:
    """The inbox row alone: its six columns, no claim logic (cached per prefix)."""
    found = _EVIDENCE.get(inbox.table_prefix)
    if found is None:
        found = _EVIDENCE[inbox.table_prefix] = text(
            f"INSERT INTO {inbox.table_prefix}inbox (consumer, command_id, digest,"
            " processed_at, expires_at, result_expires_at) VALUES (:consumer, :command_id,"
            " :digest, :processed_at, :expires_at, :result_expires_at)"
            " ON CONFLICT (consumer, command_id) DO NOTHING"
        )
    return found


_EVIDENCE: dict[str, Any] = {}


def evidence_row(cid: str) -> dict[str, Any]:
    """The six columns of one command's inbox row, as the evidence variants write them."""
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    return {
        "consumer": "bench",
        "command_id": cid,
        "digest": "d" * 64,
        "processed_at": now,
        "expires_at": now + RETENTION,
        "result_expires_at": None,
    }


def _worker(
    url: str, base: str, orders: list[list[str]], worker: int, barrier: Any, queue: Any
) -> None:
    engine = create_engine(url, pool_size=1)
    inboxes = {
        mode: Inbox(engine, retention=RETENTION, table_prefix=_prefix(base, mode)) for mode in MODES
    }
    ids = {mode: [f"w{worker}-{mode}-{i}" for i in range(MESSAGES)] for mode in MODES}
    # Untimed: the duplicates' evidence, then each mode warmed up on its own
    # tables (the same number of rows in each).
    _run_mode(engine, inboxes["duplicate"], "guarded", ids["duplicate"], worker)
    for mode in MODES:
        warm = [f"w{worker}-{mode}-warm-{i}" for i in range(WARMUP)]
        if mode == "duplicate":
            warm = ids["duplicate"][:WARMUP]
        _run_mode(engine, inboxes[mode], mode, warm, worker)
    timings = dict.fromkeys(MODES, 0.0)
    for k, first in enumerate(range(0, MESSAGES, CHUNK)):
        for mode in orders[k]:  # the same order in every worker: a barrier per chunk
            chunk = ids[mode][first : first + CHUNK]
            barrier.wait()
            start = time.perf_counter()
            _run_mode(engine, inboxes[mode], mode, chunk, worker)
            timings[mode] += time.perf_counter() - start
            barrier.wait()
    queue.put(timings)
    engine.dispose()


def _round(url: str, workers: int, order: list[str], i: int) -> dict[str, float]:
    """Round ``i``: each mode's wall time for the slowest worker, the modes in
    an order shuffled for every chunk (from ``order``, seeded by ``i``)."""
    orders = _harness.shuffled_orders(order, -(-MESSAGES // CHUNK), i)
    base = f"b{uuid.uuid4().hex[:6]}"
    _setup(url, base, workers)
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(workers), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(url, base, orders, w, barrier, queue))
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    results = [queue.get(timeout=900) for _ in procs]
    for p in procs:
        p.join()
    return {mode: max(r[mode] for r in results) for mode in MODES}


def _measure(url: str, workers: int, n_rounds: int) -> list[dict[str, float]]:
    print(f"-- {url.split('://', maxsplit=1)[0]}, {workers} worker(s)", flush=True)
    return _harness.run_rounds(MODES, lambda order, i: _round(url, workers, order, i), n_rounds)


def _row(label: str, workers: int, rounds: list[dict[str, float]]) -> list[object]:
    total = MESSAGES * workers
    return [
        label,
        workers,
        f"{statistics.median(total / r['bare'] for r in rounds):,.0f}",
        _harness.ratio(rounds, "guarded", "bare"),
        _harness.ratio(rounds, "floor", "bare"),
        _harness.ratio(rounds, "guarded", "floor"),
        _harness.ratio(rounds, "evidence", "bare"),
        _harness.ratio(rounds, "guarded", "evidence"),
        _harness.ratio(rounds, "guarded", "unpipelined"),
        _harness.ratio(rounds, "duplicate", "bare"),
        f"{statistics.median(total / r['duplicate'] for r in rounds):,.0f}",
    ]


def _targets(pg: dict[int, list[dict[str, float]]]) -> list[Target]:
    out = []
    for workers, rounds in pg.items():
        out.append(
            Target(
                "inbox",
                f"guard / evidence row, PostgreSQL, {workers} worker(s)",
                EVIDENCE_BOUND,
                "lower",
                _harness.ratio(rounds, "guarded", "evidence"),
            )
        )
    for workers, rounds in pg.items():
        out.append(
            Target(
                "inbox",
                f"verified duplicate / bare message, PostgreSQL, {workers} worker(s)",
                DUP_BOUND,
                "lower",
                _harness.ratio(rounds, "duplicate", "bare"),
            )
        )
    return out


def main() -> None:
    """Measure PostgreSQL with 1 and 4 workers, and SQLite with 1."""
    sys.path.insert(0, os.getcwd())
    n_rounds = _harness.rounds()
    load = Load()
    began = time.perf_counter()
    db = f"bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(f"{PG_ADMIN}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{db}"'))
    pg: dict[int, list[dict[str, float]]] = {}
    try:
        for workers in (1, 4):
            pg[workers] = _measure(f"{PG_ADMIN}/{db}", workers, n_rounds)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = _measure(f"sqlite:///{tmp}/bench.db", 1, n_rounds)
    load.stop()
    targets = _targets(pg)
    _harness.record("inbox", targets, load, n_rounds)
    rows = [_row("PostgreSQL", w, r) for w, r in pg.items()]
    rows.append(_row("SQLite (file)", 1, sqlite))
    header = [
        "database",
        "workers",
        "bare msg/s",
        "guarded / bare time",
        "floor / bare time",
        "guarded / floor time",
        "evidence row / bare time",
        "guarded / evidence row time",
        "guarded / unpipelined time",
        "verified duplicate / bare fresh time",
        "duplicates msg/s",
    ]
    verdicts = "; ".join(
        f"{t.label}: {t.measured.median:.2f} against <= {t.bound:.2f},"
        f" {'met' if t.met else 'missed'}"
        for t in targets
    )
    body = (
        f"{MESSAGES:,} messages per worker per mode after a {WARMUP}-message warm-up,"
        f" {n_rounds} rounds, the modes alternating in chunks of {CHUNK} in an order"
        " shuffled for every chunk (all workers on the same mode at once); every mode writes"
        " tables of its own, created empty for the round and warmed up alike. Each ratio"
        " is taken within a round (the slowest worker's time, summed over its chunks),"
        " median (min-max) shown."
        " A message is one transaction on a Core connection: `bare` runs an UPDATE and"
        " an INSERT; `guarded` runs the same inside `inbox.guard` with a fresh command"
        " ID; `duplicate` runs `inbox.guard` on an already-committed ID (the mutation is"
        " skipped); `floor` runs the bare mutation plus one `INSERT ... ON CONFLICT DO"
        " NOTHING` of the ID into a one-column table, the least any one-statement"
        " record of the ID can cost; `evidence` runs the bare mutation plus the inbox row"
        " alone (its six columns into an inbox table of its own, a plain `INSERT ... VALUES"
        " ... ON CONFLICT DO NOTHING`: its key and expiry index, no claim logic), the"
        " floor the targets count from, since no guard that writes the evidence the"
        " guarantees need can cost less; `unpipelined` runs `guarded` with the"
        " pipelines of G35 and G36 turned off (`BEGIN; SAVEPOINT` as one query before the"
        " claim, the result store before `RELEASE SAVEPOINT; COMMIT` as one query), so"
        " `guarded / unpipelined` is what they save (below 1) or cost here.\n\n"
        f"Targets (PostgreSQL): guarded/evidence row <= {EVIDENCE_BOUND:.2f} and a verified"
        f" duplicate <= {DUP_BOUND:.2f} of a bare message, at 1 and 4 workers. Measured:"
        f" {verdicts}. Where the time of one guard goes is measured by"
        " `python -m benchmarks breakdown`, below.\n\n"
        + table(header, rows)
        + f"\n\nThe run took {time.perf_counter() - began:.0f} s."
    )
    write_section(
        "inbox",
        "Inbox overhead (`benchmarks/bench_inbox.py`)",
        body,
        load=load,
        rounds=n_rounds,
    )


if __name__ == "__main__":
    main()
