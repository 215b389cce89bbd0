"""Outbox dispatch: throughput, commit-to-consumer latency, idle cost.

- **throughput** (``ROUNDS`` rounds, medians reported): ``ROWS`` rows are
  committed in one transaction while 1 or 3 dispatcher processes
  (``integrations.outbox.dispatcher``, kombu with publisher confirms on
  RabbitMQ) wait; the clock runs from that commit until the backlog is empty.
  The baseline, measured in the same round, is the same messages published by
  one process with the same kombu transport and no outbox (no claim, no
  record).
- **latency**: ``LATENCY_MESSAGES`` commands are committed one at a time,
  ``GAP`` apart, with one dispatcher polling every ``POLL`` seconds, then
  with LISTEN/NOTIFY wake-up; a kombu consumer in this process takes the
  time from commit to receipt.
- **idle cost**: statements per second a dispatcher issues on an empty
  outbox, counted by a SQLAlchemy cursor hook on its engine.

Run with ``python -m benchmarks outbox`` (about three minutes).
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

import inboxguard
from benchmarks._report import table, write_section
from inboxguard.adapters.kombu.transport import KombuTransport
from integrations.outbox import config

ROOT = Path(__file__).resolve().parents[1]
PG_ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
BROKERS = {
    "Redis": os.environ.get("INBOXGUARD_REDIS_URL", "redis://127.0.0.1:6379/0"),
    "RabbitMQ": os.environ.get("INBOXGUARD_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//"),
}
ROWS = int(os.environ.get("BENCH_OUTBOX_ROWS", "2000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
LATENCY_MESSAGES = int(os.environ.get("BENCH_OUTBOX_LATENCY", "150"))
GAP = 0.02
POLL = 0.5
IDLE_SECONDS = 5.0


class _Dispatchers:
    """Dispatcher processes, started and waited for until they are ready."""

    def __init__(self, count: int, env: dict[str, str]) -> None:
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-m", "integrations.outbox.dispatcher"],
                cwd=ROOT,
                env={**os.environ, **env},
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            for _ in range(count)
        ]
        for proc in self.procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError("a dispatcher did not start")
        time.sleep(0.5)  # past the first (empty) poll and connection set-up

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(30)


def _rows(engine: Engine, outbox: inboxguard.Outbox, queue: str, count: int) -> None:
    with Session(engine) as session, session.begin():
        for n in range(count):
            outbox.add(
                session,
                command_id=f"bench:{uuid.uuid4().hex}",
                destination=queue,
                payload={"order_id": n},
            )


def _wait_empty(outbox: inboxguard.Outbox, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while outbox.status().backlog:
        if time.monotonic() > deadline:
            raise RuntimeError("the outbox did not drain")
        time.sleep(0.02)


def _purge(url: str, queue: str) -> None:
    from kombu import Connection, Queue

    with Connection(url) as conn, conn.channel() as channel:
        Queue(queue)(channel).delete()


def _baseline(broker_url: str, queue: str, count: int) -> float:
    from kombu import Connection, Queue

    conn = Connection(broker_url, transport_options={"confirm_publish": True})
    transport = KombuTransport(conn, declare=[Queue(queue, durable=True)])
    now = dt.datetime.now(dt.UTC)
    messages = [
        inboxguard.OutboxMessage(
            command_id=f"raw:{n}",
            destination=queue,
            payload={"order_id": n},
            headers={"x-inbox-command-id": f"raw:{n}"},
            digest="sha256:" + "0" * 64,
            created_at=now,
        )
        for n in range(count)
    ]
    start = time.perf_counter()
    for message in messages:
        transport(message)
    elapsed = time.perf_counter() - start
    transport.close()
    return count / elapsed


def _throughput(url: str, broker: str, dispatchers: int) -> float:
    prefix = f"b{uuid.uuid4().hex[:8]}_"
    queue = f"bench-{prefix}"
    engine = create_engine(url)
    config.create_all(engine, prefix)
    outbox = config.outbox(engine, prefix)
    env = {
        "OUTBOX_DATABASE_URL": url,
        "OUTBOX_PREFIX": prefix,
        "OUTBOX_QUEUE": queue,
        "OUTBOX_BROKER_URL": BROKERS[broker],
        "OUTBOX_BATCH_SIZE": "100",
        "OUTBOX_POLL": "0.05",
    }
    procs = _Dispatchers(dispatchers, env)
    try:
        _rows(engine, outbox, queue, ROWS)
        start = time.perf_counter()
        _wait_empty(outbox)
        rate = ROWS / (time.perf_counter() - start)
    finally:
        procs.stop()
        _purge(BROKERS[broker], queue)
        config.drop_all(engine, prefix)
        engine.dispose()
    return rate


def _latency(url: str, *, wakeup: bool) -> list[float]:
    from kombu import Connection

    prefix = f"l{uuid.uuid4().hex[:8]}_"
    queue = f"bench-{prefix}"
    broker_url = BROKERS["RabbitMQ"]
    engine = create_engine(url)
    config.create_all(engine, prefix)
    outbox = config.outbox(engine, prefix)
    committed: dict[str, float] = {}
    latencies: list[float] = []
    reader = Connection(broker_url)
    simple = reader.SimpleQueue(queue)
    procs = _Dispatchers(
        1,
        {
            "OUTBOX_DATABASE_URL": url,
            "OUTBOX_PREFIX": prefix,
            "OUTBOX_QUEUE": queue,
            "OUTBOX_BROKER_URL": broker_url,
            "OUTBOX_POLL": str(POLL),
            "OUTBOX_WAKEUP": "1" if wakeup else "0",
        },
    )

    def consume() -> None:
        while len(latencies) < LATENCY_MESSAGES:
            message = simple.get(block=True, timeout=30)
            arrived = time.perf_counter()
            message.ack()
            latencies.append(arrived - committed[message.properties["message_id"]])

    thread = threading.Thread(target=consume)
    try:
        thread.start()
        for n in range(LATENCY_MESSAGES):
            cid = f"lat:{n}"
            with Session(engine) as session, session.begin():
                outbox.add(session, command_id=cid, destination=queue, payload={"n": n})
                committed[cid] = time.perf_counter()  # the commit follows at once
            time.sleep(GAP)
        thread.join(60)
    finally:
        procs.stop()
        simple.close()
        _purge(broker_url, queue)
        reader.release()
        config.drop_all(engine, prefix)
        engine.dispose()
    return latencies


def _idle(url: str, *, poll: float, wakeup: bool) -> float:
    prefix = f"i{uuid.uuid4().hex[:8]}_"
    engine = create_engine(url)
    outbox = inboxguard.Outbox(engine, table_prefix=prefix)
    outbox.create_schema()
    count = 0

    def counted(*_args: Any) -> None:
        nonlocal count
        count += 1

    dispatcher = inboxguard.Dispatcher(
        outbox, lambda _m: None, poll_interval=dt.timedelta(seconds=poll), wakeup=wakeup
    )
    thread = threading.Thread(
        target=dispatcher.run_forever, kwargs={"install_signal_handlers": False}
    )
    thread.start()
    time.sleep(1.0)  # connections made, LISTEN issued
    event.listen(engine, "before_cursor_execute", counted)
    time.sleep(IDLE_SECONDS)
    event.remove(engine, "before_cursor_execute", counted)
    dispatcher.stop()
    thread.join(30)
    outbox.drop_schema()
    engine.dispose()
    return count / IDLE_SECONDS


def _round(url: str, broker: str, broker_url: str) -> tuple[float, float, float]:
    """One round: baseline, one dispatcher, three dispatchers (messages/s)."""
    raw_queue = f"bench-raw-{uuid.uuid4().hex[:6]}"
    base = _baseline(broker_url, raw_queue, ROWS)
    _purge(broker_url, raw_queue)
    return base, _throughput(url, broker, 1), _throughput(url, broker, 3)


def _pct(values: list[float], q: float) -> str:
    ordered = sorted(values)
    index = min(len(ordered) - 1, round(q * (len(ordered) - 1)))
    return f"{ordered[index] * 1000:.0f} ms"


def main() -> None:
    name = f"ig_bench_outbox_{uuid.uuid4().hex[:6]}"
    admin = create_engine(f"{PG_ADMIN}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = f"{PG_ADMIN}/{name}"
    try:
        rows = []
        for broker, broker_url in BROKERS.items():
            rounds = [_round(url, broker, broker_url) for _ in range(ROUNDS)]
            base, one, three = (statistics.median(r[i] for r in rounds) for i in range(3))
            rows.append(
                [
                    broker,
                    f"{base:,.0f}",
                    f"{one:,.0f}",
                    f"{statistics.median(r[1] / r[0] for r in rounds):.2f}",
                    f"{three:,.0f}",
                    f"{statistics.median(r[2] / r[0] for r in rounds):.2f}",
                ]
            )
        polled = _latency(url, wakeup=False)
        woken = _latency(url, wakeup=True)
        idle = [
            ("poll every 1 s", _idle(url, poll=1.0, wakeup=False)),
            ("poll every 0.2 s", _idle(url, poll=0.2, wakeup=False)),
            ("wake-up, poll every 30 s", _idle(url, poll=30.0, wakeup=True)),
        ]
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    body = "\n\n".join(
        [
            f"Dispatch throughput, messages per second, {ROWS:,} rows committed at once on"
            " PostgreSQL; the baseline publishes the same messages with the same kombu"
            " transport and no outbox (ratio = outbox / baseline, taken within each round;"
            f" medians of {ROUNDS} rounds). Everything (PostgreSQL, broker, dispatchers)"
            " shares the same 2 cores, so three dispatchers add contention, not capacity.",
            table(
                [
                    "broker",
                    "baseline (no outbox)",
                    "1 dispatcher",
                    "ratio",
                    "3 dispatchers",
                    "ratio",
                ],
                rows,
            ),
            f"Commit-to-consumer latency, RabbitMQ, one dispatcher, {LATENCY_MESSAGES}"
            f" commands {GAP * 1000:.0f} ms apart, poll interval {POLL} s.",
            table(
                ["mode", "p50", "p99", "p50 ratio to polling"],
                [
                    ["polling", _pct(polled, 0.5), _pct(polled, 0.99), "1.00"],
                    [
                        "LISTEN/NOTIFY wake-up",
                        _pct(woken, 0.5),
                        _pct(woken, 0.99),
                        f"{statistics.median(woken) / statistics.median(polled):.2f}",
                    ],
                ],
            ),
            "Idle cost: statements per second a dispatcher sends to an empty outbox"
            " (BEGIN/COMMIT are not statements and are not counted; each poll is one claim"
            " statement on PostgreSQL).",
            table(["mode", "statements / s"], [[m, f"{q:.2f}"] for m, q in idle]),
        ]
    )
    write_section("outbox", "Outbox dispatch", body)


if __name__ == "__main__":
    main()
