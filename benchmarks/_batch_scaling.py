"""The batch benchmark's growth measure: large batches on all three databases.

One ``guard_batch`` of ``size`` fresh commands (no handler work), then the
same batch again (all duplicates), for each size of :data:`SIZES` (1,000,
10,000 and 50,000 commands), on PostgreSQL, MariaDB and SQLite (a file),
once per round: a claim linear in the batch size costs about the same per
command at every size. The target (issue 37): the fresh claim's cost per
command at the largest size within :data:`BOUND` of that at the smallest,
on each database, the ratio taken within a round.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence

from sqlalchemy import create_engine, text

from benchmarks import _harness
from inboxguard import Inbox

__all__ = ["BOUND", "SIZES", "databases", "measure", "rows", "targets"]

MYSQL_ADMIN = os.environ.get("INBOXGUARD_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306")
SIZES = tuple(
    int(n) for n in os.environ.get("BENCH_BATCH_SCALING_SIZES", "1000,10000,50000").split(",")
)
#: Fresh cost per command at the largest size / at the smallest, at most.
BOUND = 1.5
HEADER = [
    "database",
    "batch size",
    "fresh claim, µs per command",
    "duplicates, µs per command",
    "fresh: this size / the smallest",
]


def claim_once(inbox: Inbox, size: int) -> tuple[float, float]:
    """Seconds per command: a fresh ``guard_batch`` of ``size``, then the same again."""
    tag = uuid.uuid4().hex[:8]
    commands = [(f"{tag}-{i}", {"id": i}) for i in range(size)]
    spent = []
    for _ in range(2):
        started = time.perf_counter()
        with (
            inbox.engine.begin() as conn,
            inbox.guard_batch(conn, consumer="scaling", commands=commands),
        ):
            pass
        spent.append((time.perf_counter() - started) / size)
    return spent[0], spent[1]


@contextlib.contextmanager
def databases(pg_url: str) -> Iterator[dict[str, str]]:
    """PostgreSQL (``pg_url``), a MariaDB database of its own and a SQLite file."""
    db = f"bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(f"{MYSQL_ADMIN}/")
    with admin.begin() as conn:
        conn.execute(text(f"CREATE DATABASE `{db}` CHARACTER SET utf8mb4"))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            yield {
                "PostgreSQL": pg_url,
                "MariaDB": f"{MYSQL_ADMIN}/{db}",
                "SQLite": f"sqlite:///{tmp}/scaling.db",
            }
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS `{db}`"))
        admin.dispose()


def measure(urls: dict[str, str], n_rounds: int) -> dict[str, list[dict[str, float]]]:
    """Per database, per round: ``fresh{size}`` and ``dup{size}`` seconds per command."""
    out: dict[str, list[dict[str, float]]] = {}
    for name, url in urls.items():
        engine = create_engine(url)
        inbox = Inbox(
            engine,
            retention=dt.timedelta(days=1),
            table_prefix=f"s{uuid.uuid4().hex[:6]}_",
            lock_timeout=dt.timedelta(seconds=5),
        )
        inbox.create_schema()
        try:
            claim_once(inbox, SIZES[0])  # warm-up: connection, statements, table pages
            per_round = []
            for i in range(n_rounds):
                figures: dict[str, float] = {}
                for size in _harness.rotate(SIZES, i):
                    figures[f"fresh{size}"], figures[f"dup{size}"] = claim_once(inbox, size)
                per_round.append(figures)
                print(f"  scaling, {name}, round {i + 1}/{n_rounds}", flush=True)
            out[name] = per_round
        finally:
            inbox.drop_schema()
            engine.dispose()
    return out


def rows(measured: dict[str, list[dict[str, float]]]) -> list[list[object]]:
    """One row per database and size."""
    out: list[list[object]] = []
    for name, per_round in measured.items():
        for size in SIZES:
            out.append(
                [
                    name,
                    f"{size:,}",
                    f"{_harness.median(per_round, f'fresh{size}') * 1e6:,.1f}",
                    f"{_harness.median(per_round, f'dup{size}') * 1e6:,.1f}",
                    "1.00"
                    if size == SIZES[0]
                    else str(_harness.ratio(per_round, f"fresh{size}", f"fresh{SIZES[0]}")),
                ]
            )
    return out


def targets(measured: dict[str, list[dict[str, float]]]) -> Sequence[_harness.Target]:
    """Per database: the largest batch's cost per command / the smallest's."""
    big, small = SIZES[-1], SIZES[0]
    return [
        _harness.Target(
            benchmark="batch",
            label=f"guard_batch claim per command, {big:,} / {small:,} a batch, {name}",
            bound=BOUND,
            better="lower",
            measured=_harness.ratio(per_round, f"fresh{big}", f"fresh{small}"),
        )
        for name, per_round in measured.items()
    ]
