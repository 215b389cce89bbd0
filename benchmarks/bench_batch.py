"""Batch claims: per-message cost of ``inbox.guard_batch`` against the bare handler.

One worker on PostgreSQL. A message's mutation is the one of
``bench_inbox.py`` (one UPDATE and one INSERT on a Core connection); a batch
of ``SIZE`` messages is one transaction, for every variant:

- ``bare{SIZE}``: the mutation of each message, nothing else;
- ``batch{SIZE}``: ``inbox.guard_batch`` over the batch (fresh command IDs),
  the mutation of each fresh entry and its result (``{"ok": true}``) stored;
- ``guard{SIZE}``: ``inbox.guard`` around each message's mutation, in the
  same one transaction per batch (what a batch consumer pays without
  ``guard_batch``), with the same result stored;
- ``evidence100``: the bare mutations plus the batch's inbox rows alone, one
  plain multi-row ``INSERT ... ON CONFLICT DO NOTHING`` of their six columns
  (no claim logic, no result): the floor any batch that writes the evidence
  pays (issue 37);
- ``lean100``: ``guard_batch`` at 100 whose entries assign no result, so no
  result store is sent (G31);
- ``powertools100`` (with the ``bench`` extra): the batch consumer with AWS
  Powertools' idempotency per record on Redis around each message's
  mutation, one transaction a batch of 100 (:mod:`benchmarks._batch_powertools`).

Sizes 1, 10 and 100. Each round runs every variant on
``BENCH_BATCH_MESSAGES`` messages (default 2,000) after a warm-up, the
variants alternating in chunks of ``CHUNK`` messages (one batch of 100, ten
of 10, a hundred of 1) in an order shuffled afresh for every chunk, so that
every variant sees the same moments of a shared machine and none always
follows the same neighbour; the per-message cost ratio of each variant to
the bare handler of the same size is taken within a round (times summed over
the chunks), and the median over rounds (min-max) is reported. Targets
(issue 37): a batch of 100 at <= 1.10x the bare handler's per-message cost,
and ``guard_batch`` at 100 at >= 1.5x Powertools' per-record throughput.

Then the claim's growth with the batch size on PostgreSQL, MariaDB and
SQLite (:mod:`benchmarks._batch_scaling`: 1,000, 10,000 and 50,000 commands,
each once a round), with its target: the cost per command at 50,000 within
1.5x that at 1,000 on each. Run with ``python -m benchmarks batch``;
``python -m benchmarks.bench_batch scaling [URL]`` measures the growth alone
on any database (PostgreSQL by default) and writes nothing.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import time
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

from benchmarks import _batch_powertools, _batch_scaling, _harness
from benchmarks._report import table, write_section
from benchmarks.bench_inbox import evidence_row, evidence_statement
from inboxguard import Inbox
from tests.helpers import business_tables

PG_ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
MESSAGES = int(os.environ.get("BENCH_BATCH_MESSAGES", "2000"))
SIZES = (1, 10, 100)
KINDS = ("bare", "batch", "guard")
#: The per-record Powertools consumer runs when the bench extra is installed.
PEER = ("powertools100",) if _batch_powertools.available() else ()
#: The floor of a batch and guard_batch without results, at 100 only.
FLOOR = ("evidence100", "lean100")
VARIANTS = (*(f"{kind}{size}" for size in SIZES for kind in KINDS), *FLOOR, *PEER)
#: guard_batch at 100 at least this many times Powertools' per-record throughput.
POWERTOOLS_BOUND = 1.5
#: Messages of one variant run in a row before the next variant's turn (a
#: multiple of every size).
CHUNK = 100


class Bench:
    """The engine, inbox and business tables of one run."""

    def __init__(self, engine: Engine, prefix: str) -> None:
        self.engine = engine
        self.inbox = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
        self.inbox.create_schema()
        md, accounts, ledger = business_tables(prefix)
        md.create_all(engine)
        with engine.begin() as conn:
            conn.execute(accounts.insert().values(id=0, balance=0))
        self.update = accounts.update().where(accounts.c.id == 0)
        self.bump = self.update.values(balance=accounts.c.balance + 1)
        self.ledger = ledger
        self.powertools: Any = None
        self.close_powertools = _noop
        if PEER:
            key_prefix = f"{prefix}pt:"
            self.powertools, self.close_powertools = _batch_powertools.per_record(
                self._mutate, key_prefix
            )

    def run(self, variant: str, tag: str, count: int = MESSAGES) -> float:
        """Seconds to handle ``count`` messages with ``variant``."""
        kind, size = variant.rstrip("0123456789"), int(variant.lstrip("abcdefghijklmnopqrstuvwxyz"))
        ids = [f"{tag}-{variant}-{i}" for i in range(count)]
        batches = [ids[i : i + size] for i in range(0, len(ids), size)]
        started = time.perf_counter()
        for batch in batches:
            with self.engine.connect() as conn, conn.begin():
                self._batch(conn, kind, batch)
        return time.perf_counter() - started

    def _batch(self, conn: Any, kind: str, batch: list[str]) -> None:
        """One batch, in the caller's transaction, as ``kind`` handles it."""
        if kind == "bare":
            for cid in batch:
                self._mutate(conn, cid)
        elif kind == "powertools":
            for cid in batch:
                self.powertools(conn, cid)
        elif kind == "evidence":
            conn.execute(evidence_statement(self.inbox), [evidence_row(cid) for cid in batch])
            for cid in batch:
                self._mutate(conn, cid)
        elif kind in {"batch", "lean"}:
            commands = [(cid, {"id": cid}) for cid in batch]
            with self.inbox.guard_batch(conn, consumer="bench", commands=commands) as b:
                for entry in b.fresh:
                    self._mutate(conn, entry.command_id)
                    if kind == "batch":
                        entry.result = {"ok": True}
        else:
            for cid in batch:
                with self.inbox.guard(
                    conn, consumer="bench", command_id=cid, payload={"id": cid}
                ) as e:
                    if not e.duplicate:
                        self._mutate(conn, cid)
                        e.result = {"ok": True}

    def _mutate(self, conn: object, cid: str) -> None:
        conn.execute(self.bump)  # type: ignore[attr-defined]
        conn.execute(self.ledger.insert().values(command_id=cid, amount=1))  # type: ignore[attr-defined]


def claim_scaling(
    inbox: Inbox, sizes: tuple[int, ...] = _batch_scaling.SIZES
) -> list[list[object]]:
    """Rows ``[size, fresh µs per command, duplicate µs per command]``: one
    batch of ``size`` fresh commands claimed, then claimed again."""
    rows: list[list[object]] = []
    for size in sizes:
        fresh, dup = _batch_scaling.claim_once(inbox, size)
        rows.append([size, f"{fresh * 1e6:,.1f}", f"{dup * 1e6:,.1f}"])
    return rows


def _noop() -> None:
    return None


_SCALING_HEADER = ["batch size", "fresh claim, µs per command", "duplicates, µs per command"]


def _round(bench: Bench, order: list[str], i: int) -> dict[str, float]:
    """One round: every variant's messages in chunks of ``CHUNK``, the variants
    in an order shuffled afresh for every chunk (seeded by the round)."""
    spent = dict.fromkeys(order, 0.0)
    for k, chunk_order in enumerate(_harness.shuffled_orders(order, MESSAGES // CHUNK, i)):
        for variant in chunk_order:
            spent[variant] += bench.run(variant, f"r{i}c{k}", CHUNK)
    return spent


def _rows(per_round: list[Mapping[str, float]]) -> list[list[object]]:
    rows: list[list[object]] = []
    for size in SIZES:
        bare = [MESSAGES / r[f"bare{size}"] for r in per_round]
        rows.append(
            [
                size,
                f"{sorted(bare)[len(bare) // 2]:,.0f}",
                str(_harness.ratio(per_round, f"batch{size}", f"bare{size}")),
                str(_harness.ratio(per_round, f"guard{size}", f"bare{size}")),
                str(_harness.ratio(per_round, f"batch{size}", f"guard{size}")),
            ]
        )
    return rows


def main() -> None:
    """Measure on a PostgreSQL database of its own; write the section and the target."""
    n_rounds = _harness.rounds()
    if MESSAGES < CHUNK or MESSAGES % CHUNK:
        msg = f"BENCH_BATCH_MESSAGES must be a multiple of {CHUNK}, got {MESSAGES}"
        raise ValueError(msg)
    load = _harness.Load()
    began = time.monotonic()
    db = f"bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(f"{PG_ADMIN}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{db}"'))
    engine = create_engine(f"{PG_ADMIN}/{db}", pool_size=1)
    try:
        bench = Bench(engine, f"b{uuid.uuid4().hex[:6]}_")
        for variant in VARIANTS:  # warm-up: caches, compiled statements, table pages
            bench.run(variant, "warm")
        per_round = _harness.run_rounds(
            VARIANTS, lambda order, i: _round(bench, order, i), n_rounds
        )
        bench.close_powertools()
        with _batch_scaling.databases(f"{PG_ADMIN}/{db}") as urls:
            scaling = _batch_scaling.measure(urls, n_rounds)
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()
    load.stop()
    moonshot = _harness.Target(
        benchmark="batch",
        label="guard_batch, 100 a batch: per-message cost / bare handler",
        bound=1.10,
        better="lower",
        measured=_harness.ratio(per_round, "batch100", "bare100"),
        note="PostgreSQL, 1 worker",
        floor=_harness.ratio(per_round, "evidence100", "bare100"),
        floor_variant="`evidence100` / bare",
    )
    targets = [moonshot, *_peer_target(per_round), *_batch_scaling.targets(scaling)]
    _harness.record("batch", targets, load, n_rounds)
    header = [
        "batch size",
        "bare msg/s",
        "guard_batch / bare",
        "guard per message / bare",
        "guard_batch / guard per message",
    ]
    verdicts = "; ".join(
        f"{t.label}: {t.measured} against {'<=' if t.better == 'lower' else '>='}"
        f" {t.bound:.2f}, {'met' if t.met else 'missed'}"
        for t in targets
    )
    body = (
        f"PostgreSQL, one worker, {MESSAGES:,} messages per variant per round after a"
        f" warm-up, the variants alternating in chunks of {CHUNK} messages in an order"
        " shuffled afresh for every chunk; one transaction per batch for every variant."
        " A message's mutation is `bench_inbox.py`'s UPDATE and INSERT. `guard_batch`"
        " claims the batch and stores each fresh entry's result; `guard per message`"
        " runs `inbox.guard` around each message in the same transaction, the way a"
        " batch consumer guards without `guard_batch`. Per-message cost ratios, each"
        " taken within a round (times summed over the chunks): median (min-max)."
        f"{_peer_text(per_round)}{_floor_text(per_round)} Targets: {verdicts}."
        f" The run took {time.monotonic() - began:,.0f} s.\n\n"
        + table(header, _rows(per_round))
        + "\n\nThe claim's growth with the batch size, on each database: one"
        " `guard_batch` of fresh commands, then the same batch again (all duplicates),"
        " each size once a round in an order rotated per round, no handler work;"
        " microseconds per command (medians over the rounds) and the fresh claim's"
        " per-command cost against the smallest size's, taken within a round.\n\n"
        + table(_batch_scaling.HEADER, _batch_scaling.rows(scaling))
    )
    write_section(
        "batch",
        "Batch claims (`benchmarks/bench_batch.py`)",
        body,
        load=load,
        rounds=n_rounds,
    )


def _peer_target(per_round: list[Mapping[str, float]]) -> list[_harness.Target]:
    if not PEER:
        return []
    return [
        _harness.Target(
            benchmark="batch",
            label="guard_batch, 100 a batch: throughput / Powertools per record",
            bound=POWERTOOLS_BOUND,
            better="higher",
            measured=_harness.ratio(per_round, "powertools100", "batch100"),
            note="PostgreSQL and Redis, 1 worker",
            floor=_harness.ratio(per_round, "powertools100", "evidence100"),
            floor_variant="Powertools / `evidence100`",
        )
    ]


def _floor_text(per_round: list[Mapping[str, float]]) -> str:
    ratio = _harness.ratio
    return (
        " `evidence100` is the bare batch plus its inbox rows alone (one plain multi-row"
        " `INSERT ... ON CONFLICT DO NOTHING` of their six columns, no claim logic, no"
        " result), the floor any batch that writes the evidence pays: per message,"
        f" {ratio(per_round, 'evidence100', 'bare100')} of the bare batch; `guard_batch` at"
        f" 100 costs {ratio(per_round, 'batch100', 'evidence100')} of that floor, and"
        f" `lean100` (`guard_batch` whose entries assign no result, so no result store)"
        f" {ratio(per_round, 'lean100', 'bare100')} of the bare batch and"
        f" {ratio(per_round, 'lean100', 'evidence100')} of the floor."
    )


def _peer_text(per_round: list[Mapping[str, float]]) -> str:
    if not PEER:
        return (
            " AWS Powertools is not installed (`make .venv/.installed-bench`): the"
            " per-record peer did not run."
        )
    return (
        " `powertools100` is the same batch consumer with AWS Powertools' idempotency"
        " per record (`idempotent_function` on the local Redis, an in-progress `SET NX`"
        " before each record's mutation and the completed record after it, outside the"
        " batch's transaction), one transaction a batch of 100: its time per message"
        f" against `guard_batch`'s, {_harness.ratio(per_round, 'powertools100', 'batch100')}"
        " (guard_batch's throughput / Powertools')."
    )


def scaling_main(url: str | None = None) -> None:
    """Print the claim's growth on ``url`` (a fresh PostgreSQL database by
    default) in tables of its own; writes nothing."""
    admin, db = None, None
    if url is None:
        db = f"bench_{uuid.uuid4().hex[:8]}"
        admin = create_engine(f"{PG_ADMIN}/postgres", isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{db}"'))
        url = f"{PG_ADMIN}/{db}"
    engine = create_engine(url)
    inbox = Inbox(
        engine,
        retention=dt.timedelta(days=1),
        table_prefix=f"s{uuid.uuid4().hex[:6]}_",
        lock_timeout=dt.timedelta(seconds=5),
    )
    inbox.create_schema()
    try:
        print(engine.dialect.name)
        print(table(_SCALING_HEADER, claim_scaling(inbox)))
    finally:
        inbox.drop_schema()
        engine.dispose()
        if admin is not None:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
            admin.dispose()


if __name__ == "__main__":
    if sys.argv[1:2] == ["scaling"]:
        scaling_main(sys.argv[2] if len(sys.argv) > 2 else None)
    else:
        main()
