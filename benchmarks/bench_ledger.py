"""Ledger overhead: ``ledger.execute`` against a bare provider call plus one insert.

The provider is an in-process stub (its ``send`` does no I/O), so the figures
measure what the ledger adds, not a network. Each round runs, in one process:

- ``bare``: the provider call, then one INSERT of its receipt in a transaction
  (what a careful caller writes without a ledger);
- ``execute``: ``ledger.execute`` on a fresh effect key (a read, then commit
  ``prepared``, call, record ``confirmed``: two write transactions);
- ``repeat``: ``ledger.execute`` on an already-confirmed key (one read, no call).

Each round starts on fresh tables and runs the modes in an order rotated by
the round (``benchmarks._harness``); ratios are taken within a round and the
median (min-max) over rounds is reported. Run with ``python -m benchmarks
ledger`` (``BENCH_ROUNDS``, default 5; ``BENCH_EFFECTS``, default 1000).
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, text

from benchmarks._harness import Load, median, ratio, rounds, run_rounds
from benchmarks._report import table, write_section
from inboxguard import EffectLedger, ProviderContract, Receipt

PG_ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
EFFECTS = int(os.environ.get("BENCH_EFFECTS", "1000"))
WARMUP = 100
MODES = ("bare", "execute", "repeat")


class StubProvider:
    """Answers at once; remembers nothing (the ledger never re-sends here)."""

    contract = ProviderContract(name="stub", idempotency_window=dt.timedelta(hours=24))

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


def _round(url: str, tag: str, order: list[str]) -> dict[str, float]:
    """One round on fresh tables: each mode once, in ``order``."""
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
    keys = {mode: [f"{tag}-{mode}-{i}" for i in range(EFFECTS)] for mode in MODES}
    _timed(execute, keys["repeat"])  # confirmed before the clock: `repeat` finds them so
    runs = {"bare": bare, "execute": execute, "repeat": execute}
    timings = {mode: _timed(runs[mode], keys[mode]) for mode in order}
    assert provider.calls == 2 * WARMUP + 3 * EFFECTS
    ledger.drop_schema()
    md.drop_all(engine)
    engine.dispose()
    return timings


def _measure(url: str, n_rounds: int, db: str) -> list[dict[str, float]]:
    print(f"{db}:", flush=True)
    return run_rounds(MODES, lambda order, i: _round(url, f"r{i}", order), n_rounds)


def _row(label: str, rounds: list[dict[str, float]]) -> list[object]:
    return [
        label,
        f"{EFFECTS / median(rounds, 'bare'):,.0f}",
        f"{EFFECTS / median(rounds, 'execute'):,.0f}",
        str(ratio(rounds, "execute", "bare")),
        str(ratio(rounds, "repeat", "bare")),
    ]


def main() -> None:
    """Measure PostgreSQL and SQLite, one process each."""
    n_rounds = rounds()
    load = Load()
    began = time.monotonic()
    db = f"bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(f"{PG_ADMIN}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{db}"'))
    rows: list[list[object]] = []
    try:
        rows.append(_row("PostgreSQL", _measure(f"{PG_ADMIN}/{db}", n_rounds, "PostgreSQL")))
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(
            _row("SQLite (file)", _measure(f"sqlite:///{tmp}/bench.db", n_rounds, "SQLite"))
        )
    load.stop()
    header = [
        "database",
        "bare effects/s",
        "execute effects/s",
        "execute / bare time",
        "repeat (confirmed) / bare time",
    ]
    body = (
        f"{EFFECTS:,} effects per mode after a {WARMUP}-effect warm-up, one process; each"
        " round starts on fresh tables and runs the three modes in a rotated order. Ratios"
        " are taken within a round, median (min-max) shown; rates are medians over the"
        " rounds. `bare` is a provider call (an in-process stub, no I/O) followed by one"
        " INSERT of its receipt in a transaction; `execute` is `ledger.execute` on a fresh"
        " key (a read, then commit `prepared` with its history entry, call, record"
        " `confirmed` with its history entry: two write transactions); `repeat` is"
        " `ledger.execute` on a key confirmed before the clock started (one read, no"
        " provider call). Against a real provider the network round trip dominates both."
        " The ledger has no numeric target.\n\n" + table(header, rows)
    )
    write_section(
        "ledger", "Ledger overhead (`benchmarks/bench_ledger.py`)", body, load=load, rounds=n_rounds
    )
    print(f"elapsed {time.monotonic() - began:.0f}s")


if __name__ == "__main__":
    main()
