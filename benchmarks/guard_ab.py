"""One process, one workload: fresh and duplicate guards on PostgreSQL.

Meant for whole-process A/B timing of two checkouts of the package (for
example before and after a restructuring): run the same file with
``PYTHONPATH`` pointing at each checkout, alternating, and compare the
per-pair ratio of wall times. It prints the checkout it imported and the
elapsed seconds of its timed section.

    PYTHONPATH=. python benchmarks/guard_ab.py

Environment: ``INBOXGUARD_PG_URL`` (admin URL, default the local server),
``AB_MESSAGES`` (default 2000).
"""

from __future__ import annotations

import datetime as dt
import os
import time
import uuid

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, insert, text

import inboxguard

PG_ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
MESSAGES = int(os.environ.get("AB_MESSAGES", "2000"))


def main() -> None:
    name = f"ab_{uuid.uuid4().hex[:10]}"
    admin = create_engine(f"{PG_ADMIN}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        engine = create_engine(f"{PG_ADMIN}/{name}")
        inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1))
        inbox.create_schema()
        meta = MetaData()
        orders = Table(
            "orders", meta, Column("id", Integer, primary_key=True), Column("ref", String(64))
        )
        meta.create_all(engine)
        started = time.perf_counter()
        for round_ in range(2):  # the second round replays every command: duplicates
            for i in range(MESSAGES):
                body = {"order": i, "amount": 100 + i}
                with (
                    engine.begin() as conn,
                    inbox.guard(
                        conn, consumer="ab.orders", command_id=f"order-{i}", payload=body
                    ) as entry,
                ):
                    if entry.duplicate:
                        continue
                    conn.execute(insert(orders).values(id=i, ref=f"r{i}"))
                    entry.result = {"round": round_}
        elapsed = time.perf_counter() - started
        print(f"{inboxguard.__file__} {elapsed:.3f}s for {MESSAGES} fresh + {MESSAGES} duplicates")
        engine.dispose()
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


if __name__ == "__main__":
    main()
