"""Ledger overhead: ``ledger.execute`` against a bare provider call plus one insert.

The provider is an in-process stub (its ``send`` does no I/O), so the figures
measure what the ledger adds, not a network. Each round runs, in one process:

- ``bare``: the provider call, then one INSERT of its receipt in a transaction
  (what a careful caller writes without a ledger);
- ``execute``: ``ledger.execute`` on a fresh effect key (a read, then commit
  ``prepared``, call, record ``confirmed``: two write transactions);
- ``repeat``: ``ledger.execute`` on an already-confirmed key (one read, no call).

Ratios are taken within a round and the median over rounds is reported. Run
with ``python -m benchmarks ledger``.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, text

from benchmarks._report import table, write_section
from inboxguard import EffectLedger, ProviderContract, Receipt

PG_ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
EFFECTS = int(os.environ.get("BENCH_EFFECTS", "1000"))
WARMUP = 100
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
MODES = ("bare", "execute", "repeat")


class StubProvider:
    """Answers at once; remembers nothing (the ledger never re-sends here)."""

    contract = ProviderContract(name="stub")

    def __init__(self) -> None:
        self.calls = 0

    def send(self, idempotency_key: str, payload: Any) -> Receipt:
        self.calls += 1
        return Receipt(f"r-{self.calls}")

    def lookup(self, idempotency_key: str) -> Receipt | None:
        return None


def _timed(fn: Callable[[str], object], keys: list[str]) -> float:
    start = time.perf_counter()
    for key in keys:
        fn(key)
    return time.perf_counter() - start


def _round(url: str, tag: str) -> dict[str, float]:
    engine = create_engine(url)
    prefix = f"b{uuid.uuid4().hex[:8]}_"
    ledger = EffectLedger(engine, table_prefix=prefix)
    ledger.create_schema()
    md = MetaData()
    receipts = Table(
        f"{prefix}receipts",
        md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("effect_key", String(255), nullable=False),
        Column("reference", String(255), nullable=False),
    )
    md.create_all(engine)
    provider = StubProvider()
    payload = {"amount": 100, "currency": "EUR"}

    def bare(key: str) -> None:
        receipt = provider.send(key, payload)
        with engine.begin() as conn:
            conn.execute(receipts.insert().values(effect_key=key, reference=receipt.reference))

    def execute(key: str) -> None:
        ledger.execute(key, provider, payload)

    warm = [f"{tag}-warm-{i}" for i in range(WARMUP)]
    _timed(bare, warm)
    _timed(execute, warm)
    keys = [f"{tag}-{i}" for i in range(EFFECTS)]
    timings = {
        "bare": _timed(bare, keys),
        "execute": _timed(execute, keys),
        "repeat": _timed(execute, keys),
    }
    assert provider.calls == 2 * (WARMUP + EFFECTS)
    ledger.drop_schema()
    md.drop_all(engine)
    engine.dispose()
    return timings


def _row(label: str, rounds: list[dict[str, float]]) -> list[object]:
    ratio = [r["execute"] / r["bare"] for r in rounds]
    repeat = [r["repeat"] / r["bare"] for r in rounds]
    bare_rate = statistics.median(EFFECTS / r["bare"] for r in rounds)
    exec_rate = statistics.median(EFFECTS / r["execute"] for r in rounds)
    return [
        label,
        f"{bare_rate:,.0f}",
        f"{exec_rate:,.0f}",
        f"{statistics.median(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f})",
        f"{statistics.median(repeat):.2f} ({min(repeat):.2f}-{max(repeat):.2f})",
    ]


def main() -> None:
    """Measure PostgreSQL and SQLite, one process each."""
    db = f"bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(f"{PG_ADMIN}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{db}"'))
    rows: list[list[object]] = []
    try:
        url = f"{PG_ADMIN}/{db}"
        rows.append(_row("PostgreSQL", [_round(url, f"r{i}") for i in range(ROUNDS)]))
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        rows.append(_row("SQLite (file)", [_round(url, f"r{i}") for i in range(ROUNDS)]))
    header = [
        "database",
        "bare effects/s",
        "execute effects/s",
        "execute / bare time",
        "repeat (confirmed) / bare time",
    ]
    body = (
        f"{EFFECTS:,} effects per mode after a {WARMUP}-effect warm-up, {ROUNDS} rounds, one"
        " process; ratios are taken within a round, median (min-max) shown. `bare` is a"
        " provider call (an in-process stub, no I/O) followed by one INSERT of its receipt"
        " in a transaction; `execute` is `ledger.execute` on a fresh key (a read, then"
        " commit `prepared` with its history entry, call, record `confirmed` with its"
        " history entry: two write transactions); `repeat` is `ledger.execute` on a"
        " confirmed key (one read, no provider call). Against a real provider the network"
        " round trip"
        " dominates both.\n\n" + table(header, rows)
    )
    write_section("ledger", "Ledger overhead (`benchmarks/bench_ledger.py`)", body)


if __name__ == "__main__":
    main()
