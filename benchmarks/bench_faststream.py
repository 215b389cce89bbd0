"""FastStream throughput: the same handler on plain FastStream and behind InboxMiddleware.

One RabbitMQ queue per variant and round, PostgreSQL through asyncpg, one
process. The handler inserts one row in one transaction:

- ``plain``: FastStream alone; the handler opens its ``AsyncSession`` and
  transaction itself (what a FastStream service without the inbox does);
- ``guarded``: the broker carries ``InboxMiddleware``; the handler writes
  through ``inboxguard.current_session()`` inside the claim's transaction.

Each round fills both queues with ``BENCH_MESSAGES`` fresh commands, then
consumes them, the variants in an order rotated per round
(``benchmarks._harness``), so drift of the shared machine weighs on each
alike; the ratio (guarded time over plain time) is taken within a round and
the median of the per-round ratios (min-max) over ``BENCH_ROUNDS`` rounds
(default 5) is reported, with the load. Both subscribers run up to 10
deliveries at once (``prefetch_count=10``). Run with
``python -m benchmarks faststream``; a default run takes about a minute.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import statistics
import sys
import time
import uuid
from typing import Any

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, text
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

from benchmarks import _harness
from benchmarks._report import table, write_section
from inboxguard import Inbox, current_session

PG_ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
AMQP_URL = os.environ.get("INBOXGUARD_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")
MESSAGES = int(os.environ.get("BENCH_MESSAGES", "500"))
PREFETCH = 10
VARIANTS = ("plain", "guarded")


def _payments(prefix: str) -> Table:
    return Table(
        f"{prefix}payments",
        MetaData(),
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("command_id", String(100), nullable=False),
        Column("amount", Integer, nullable=False),
    )


async def _consume(variant: str, engine: AsyncEngine, inbox: Inbox, tag: str) -> float:
    """Fill a queue with MESSAGES commands, then time consuming all of them."""
    from faststream.rabbit import Channel, RabbitBroker, RabbitQueue

    from inboxguard.adapters.faststream import InboxMiddleware

    payments = _payments(inbox.table_prefix)
    sessions = async_sessionmaker(engine)
    middlewares: list[Any] = []
    if variant == "guarded":
        guard = InboxMiddleware(
            inbox,
            consumer=f"bench-{tag}",
            command_id="command_id",
            async_session_factory=sessions,
            shared_consumer=True,
        )
        middlewares = [guard]
    broker = RabbitBroker(AMQP_URL, middlewares=middlewares, log_level=10)
    # deleted by RabbitMQ when the subscriber stops
    queue = RabbitQueue(f"bench-{tag}-{variant}", durable=False, auto_delete=True)
    done = asyncio.Event()
    seen = 0

    async def apply(body: dict[str, Any]) -> None:
        nonlocal seen
        row = payments.insert().values(command_id=body["command_id"], amount=body["amount"])
        if variant == "guarded":
            await current_session().execute(row)
        else:
            async with sessions() as session, session.begin():
                await session.execute(row)
        seen += 1
        if seen == MESSAGES:
            done.set()

    broker.subscriber(queue, channel=Channel(prefetch_count=PREFETCH))(apply)
    if variant == "guarded":
        guard.check_startup(broker)
    await broker.connect()
    await broker.declare_queue(queue)
    for i in range(MESSAGES):
        await broker.publish({"command_id": f"{tag}-{variant}-{i}", "amount": i}, queue=queue)
    began = time.perf_counter()
    await broker.start()
    await asyncio.wait_for(done.wait(), 120)
    elapsed = time.perf_counter() - began
    await broker.stop()
    return elapsed


async def _rounds(async_url: str, inbox: Inbox, n_rounds: int) -> list[dict[str, float]]:
    engine = create_async_engine(async_url, pool_size=PREFETCH, max_overflow=0)
    try:
        run = uuid.uuid4().hex[:6]
        await _consume("guarded", engine, inbox, f"{run}-warm")  # connections, caches, imports
        await _consume("plain", engine, inbox, f"{run}-warm")
        rounds = []
        for i in range(n_rounds):
            order = _harness.rotate(VARIANTS, i)
            figures = {v: await _consume(v, engine, inbox, f"{run}-r{i}") for v in order}
            print(f"  round {i + 1}/{n_rounds} ({' > '.join(order)}): {figures}", flush=True)
            rounds.append(figures)
        return rounds
    finally:
        await engine.dispose()


def main() -> None:
    """Measure plain and guarded FastStream on RabbitMQ with PostgreSQL."""
    sys.path.insert(0, os.getcwd())
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
    try:
        inbox = Inbox(engine, retention=dt.timedelta(days=1), table_prefix="fs_")
        inbox.create_schema()
        _payments("fs_").metadata.create_all(engine)
        rounds = asyncio.run(_rounds(async_url, inbox, n_rounds))
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()
    load.stop()
    measured = _harness.ratio(rounds, "guarded", "plain")
    rows = [
        [
            "RabbitMQ + PostgreSQL (asyncpg)",
            PREFETCH,
            f"{statistics.median(MESSAGES / r['plain'] for r in rounds):,.0f}",
            f"{statistics.median(MESSAGES / r['guarded'] for r in rounds):,.0f}",
            str(measured),
        ]
    ]
    header = [
        "broker + database",
        "prefetch",
        "plain msg/s",
        "guarded msg/s",
        "guarded / plain time",
    ]
    body = (
        f"{MESSAGES:,} fresh commands per variant per round, {n_rounds} rounds with the"
        " variants in an order rotated per round after a warm-up; each ratio is taken within a"
        " round, median (min-max) shown. One process, FastStream's RabbitBroker with"
        f" prefetch {PREFETCH}; the handler inserts one row in one transaction: `plain`"
        " opens its own `AsyncSession`, `guarded` writes through `current_session()`"
        " inside `InboxMiddleware`'s claim. The guarded path adds the claim (one round"
        " trip and the inbox row's index writes), the stored result, and the middleware's"
        " decoding of the body and headers.\n\n" + table(header, rows)
    )
    write_section(
        "faststream",
        "FastStream throughput (`benchmarks/bench_faststream.py`)",
        body,
        load=load,
        rounds=n_rounds,
    )
    print(f"elapsed {time.monotonic() - began:.0f}s")


if __name__ == "__main__":
    main()
