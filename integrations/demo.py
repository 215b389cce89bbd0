"""The inboxguard demo: ``make demo``.

A billing consumer on SQLite (a file in a temporary directory) receives 1,000
charge commands from an in-memory, at-least-once broker that duplicates
deliveries, while four worker threads race over the same queue. A few
producers misbehave and reuse a command ID with a different amount. The demo
prints what arrived, what was applied, what was skipped and what was
quarantined, and exits non-zero if any command was applied twice or lost.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import random
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

import inboxguard
from inboxguard import Inbox, RetentionPolicy

COMMANDS = 1_000
WORKERS = 4
MISMATCHES = 5
SEED = 2026


@dataclass
class Stats:
    """What the consumers saw, counted under a lock."""

    arrived: int = 0
    applied: int = 0
    skipped: int = 0
    quarantined: int = 0
    retried: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, name: str) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + 1)


class MemoryBroker:
    """At-least-once delivery in memory: a message that is not acked comes back."""

    def __init__(self) -> None:
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()

    def publish(self, message: dict[str, Any]) -> None:
        self._queue.put(message)

    def get(self) -> dict[str, Any] | None:
        return self._queue.get()

    def redeliver(self, message: dict[str, Any]) -> None:
        self._queue.put(message)

    def close(self, consumers: int) -> None:
        for _ in range(consumers):
            self._queue.put(None)


def build_schema(engine: Engine) -> tuple[Table, Table]:
    md = MetaData()
    invoices = Table(
        "invoices",
        md,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("charged", Integer, nullable=False),
    )
    charges = Table(
        "charges",
        md,
        Column("id", Integer, primary_key=True),
        Column("command_id", String(255), nullable=False),
        Column("amount", Integer, nullable=False),
    )
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(invoices.insert(), [{"id": i, "charged": 0} for i in range(COMMANDS)])
    return invoices, charges


def produce(broker: MemoryBroker, rng: random.Random) -> list[dict[str, Any]]:
    """Every command is delivered one to three times, in shuffled order, plus a
    few mismatched copies (same ID, different amount)."""
    commands = [
        {
            "command_id": inboxguard.command_id_for(
                "invoice.charge", invoice_id=i, cycle="2026-11"
            ),
            "invoice_id": i,
            "amount": 100 + i,
        }
        for i in range(COMMANDS)
    ]
    deliveries = [dict(c) for c in commands for _ in range(rng.randint(1, 3))]
    for victim in rng.sample(commands, MISMATCHES):
        deliveries.append({**victim, "amount": victim["amount"] + 1})
    rng.shuffle(deliveries)
    for message in deliveries:
        broker.publish(message)
    return commands


def consume(
    inbox: Inbox, engine: Engine, tables: tuple[Table, Table], broker: MemoryBroker, stats: Stats
) -> None:
    """One worker thread: guard, apply, commit, then 'ack'."""
    invoices, charges = tables
    while (message := broker.get()) is not None:
        stats.add("arrived")
        try:
            with Session(engine) as session, session.begin():
                with inbox.guard(
                    session,
                    consumer="billing.charge-invoice",
                    command_id=message["command_id"],
                    payload=message,
                    details={"message": message},
                ) as entry:
                    if entry.duplicate:
                        stats.add("skipped")
                        continue
                    conn = session.connection()
                    conn.execute(
                        invoices.update()
                        .where(invoices.c.id == message["invoice_id"])
                        .values(charged=invoices.c.charged + message["amount"])
                    )
                    conn.execute(
                        charges.insert().values(
                            command_id=message["command_id"], amount=message["amount"]
                        )
                    )
                    entry.result = {"charged": message["amount"]}
            stats.add("applied")
        except inboxguard.CommandRejectedError:
            stats.add("quarantined")  # dead-lettered: never retried
        except inboxguard.InProgressError:
            stats.add("retried")
            broker.redeliver(message)  # another worker holds it: deliver again later


def verify(
    engine: Engine, tables: tuple[Table, Table], commands: list[dict[str, Any]]
) -> list[str]:
    """Return the problems found: a command applied twice or lost, or an invoice
    whose balance disagrees with the one charge recorded for it."""
    invoices, charges = tables
    with engine.connect() as conn:
        rows = conn.execute(select(charges.c.command_id, charges.c.amount)).all()
        charged = dict(conn.execute(select(invoices.c.id, invoices.c.charged)).all())
    applied: dict[str, list[int]] = {}
    for command_id, amount in rows:
        applied.setdefault(command_id, []).append(amount)
    problems = [f"{cid} applied {len(a)} times" for cid, a in applied.items() if len(a) != 1]
    for command in commands:
        amounts = applied.get(command["command_id"])
        if not amounts:
            problems.append(f"{command['command_id']} lost")
        elif charged[command["invoice_id"]] != sum(amounts):
            problems.append(f"invoice {command['invoice_id']} balance disagrees with its charge")
    return problems


def main() -> int:
    logging.basicConfig(format="  log: %(levelname)s %(name)s: %(message)s")
    print(f"inboxguard demo: {COMMANDS:,} charge commands, {WORKERS} racing worker threads, SQLite")
    rng = random.Random(SEED)
    with tempfile.TemporaryDirectory(prefix="inboxguard-demo-") as tmp:
        engine = create_engine(f"sqlite:///{Path(tmp) / 'billing.db'}")
        inbox = Inbox(engine, retention=RetentionPolicy(dead_letter_replay=dt.timedelta(days=30)))
        inbox.create_schema()
        tables = build_schema(engine)
        broker, stats = MemoryBroker(), Stats()
        commands = produce(broker, rng)
        threads = [
            threading.Thread(target=consume, args=(inbox, engine, tables, broker, stats))
            for _ in range(WORKERS)
        ]
        for thread in threads:
            thread.start()
        broker.close(WORKERS)
        for thread in threads:
            thread.join()
        problems = verify(engine, tables, commands)
        quarantine = inbox.quarantined()
        engine.dispose()
    print(f"  deliveries arrived      {stats.arrived:>6,}")
    print(f"  applied (committed)     {stats.applied:>6,}")
    print(f"  skipped as duplicates   {stats.skipped:>6,}")
    print(f"  quarantined (mismatch)  {stats.quarantined:>6,}  records: {len(quarantine)}")
    print(f"  in progress, redelivered{stats.retried:>6,}")
    for record in quarantine:
        print(
            f"    {record.command_id}: stored {record.stored_digest[:19]}…"  # type: ignore[index]
            f" incoming {record.incoming_digest[:19]}…"
        )
    if problems or stats.applied != COMMANDS:
        print("FAILED:", *problems[:20], sep="\n  ")
        return 1
    print(f"OK: every command applied exactly once ({stats.applied:,} charges, none twice).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
