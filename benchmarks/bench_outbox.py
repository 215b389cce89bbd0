"""Outbox dispatch: throughput, commit-to-consumer latency, idle cost.

- **throughput** (``BENCH_ROUNDS`` rounds, default 5, variants rotated per
  round, median of per-round ratios reported): ``ROWS`` rows are
  committed in one transaction while 1 or 3 dispatcher processes
  (``integrations.outbox.dispatcher``, kombu with publisher confirms on
  RabbitMQ) wait; the clock runs from that commit until the backlog is empty.
  The baseline, measured in the same round, is the same messages published by
  one process with the same kombu transport and no outbox (no claim, no
  record).
- **latency** (the same rounds, the two modes alternating):
  ``LATENCY_MESSAGES`` commands are committed one at a time,
  ``GAP`` apart, with one dispatcher polling every ``POLL`` seconds, then
  with LISTEN/NOTIFY wake-up; a kombu consumer in this process takes the
  time from commit to receipt.
- **idle cost**: statements per second a dispatcher issues on an empty
  outbox, counted by a SQLAlchemy cursor hook on its engine.

Run with ``python -m benchmarks outbox`` (about four minutes).
"""

from __future__ import annotations

import datetime as dt
import os
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
from benchmarks._harness import Load, median, ratio, rounds, run_rounds
from benchmarks._report import table, write_section
from inboxguard.adapters.kombu.transport import KombuTransport
from integrations.outbox import config

ROOT = Path(__file__).resolve().parents[1]
PG_ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
BROKERS = {
    "Redis": os.environ.get("INBOXGUARD_REDIS_URL", "redis://127.0.0.1:6379/0"),
    "RabbitMQ": os.environ.get("INBOXGUARD_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//"),
}
ROWS = int(os.environ.get("BENCH_OUTBOX_ROWS", "1000"))
LATENCY_MESSAGES = int(os.environ.get("BENCH_OUTBOX_LATENCY", "100"))
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


THROUGHPUT = ("baseline", "1 dispatcher", "3 dispatchers")


def _round(url: str, broker: str, order: list[str]) -> dict[str, float]:
    """One round: baseline, one dispatcher, three dispatchers (messages/s), in ``order``."""
    broker_url = BROKERS[broker]
    out = {}
    for variant in order:
        if variant == "baseline":
            raw_queue = f"bench-raw-{uuid.uuid4().hex[:6]}"
            out[variant] = _baseline(broker_url, raw_queue, ROWS)
            _purge(broker_url, raw_queue)
        else:
            out[variant] = _throughput(url, broker, int(variant[0]))
    return out


def _latency_round(url: str, order: list[str]) -> dict[str, float]:
    """One round of both latency modes: p50 and p99 (seconds) of each."""
    out = {}
    for mode in order:
        latencies = sorted(_latency(url, wakeup=mode == "wakeup"))
        out[mode] = _pct(latencies, 0.5)
        out[f"{mode} p99"] = _pct(latencies, 0.99)
    return out


def _pct(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def main() -> None:
    n_rounds = rounds()
    load = Load()
    began = time.monotonic()
    name = f"ig_bench_outbox_{uuid.uuid4().hex[:6]}"
    admin = create_engine(f"{PG_ADMIN}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = f"{PG_ADMIN}/{name}"
    try:
        rows = []
        for broker in BROKERS:
            print(f"throughput, {broker}:", flush=True)
            per_round = run_rounds(
                THROUGHPUT, lambda order, _i, b=broker: _round(url, b, order), n_rounds
            )
            rows.append(
                [
                    broker,
                    f"{median(per_round, 'baseline'):,.0f}",
                    f"{median(per_round, '1 dispatcher'):,.0f}",
                    str(ratio(per_round, "1 dispatcher", "baseline")),
                    f"{median(per_round, '3 dispatchers'):,.0f}",
                    str(ratio(per_round, "3 dispatchers", "baseline")),
                ]
            )
        print("latency:", flush=True)
        latency = run_rounds(
            ("polling", "wakeup"), lambda order, _i: _latency_round(url, order), n_rounds
        )
        idle = [
            ("poll every 1 s", _idle(url, poll=1.0, wakeup=False)),
            ("poll every 0.2 s", _idle(url, poll=0.2, wakeup=False)),
            ("wake-up, poll every 30 s", _idle(url, poll=30.0, wakeup=True)),
        ]
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    load.stop()
    body = "\n\n".join(
        [
            f"Dispatch throughput, messages per second, {ROWS:,} rows committed at once on"
            " PostgreSQL; the baseline publishes the same messages with the same kombu"
            " transport and no outbox. The three variants run in a rotated order each"
            " round; rates are medians over the rounds, each ratio (outbox / baseline"
            " throughput) is taken within a round, median (min-max) shown. Everything"
            " (PostgreSQL, broker, dispatchers) shares the same 2 cores, so three"
            " dispatchers add contention, not capacity. The outbox has no numeric target.",
            table(
                [
                    "broker",
                    "baseline (no outbox) msg/s",
                    "1 dispatcher msg/s",
                    "1 dispatcher / baseline",
                    "3 dispatchers msg/s",
                    "3 dispatchers / baseline",
                ],
                rows,
            ),
            f"Commit-to-consumer latency, RabbitMQ, one dispatcher, {LATENCY_MESSAGES}"
            f" commands {GAP * 1000:.0f} ms apart, poll interval {POLL} s; the two modes"
            " alternate each round; p50 and p99 are medians over the rounds, the ratio is"
            " taken within a round.",
            table(
                ["mode", "p50", "p99", "p50 / polling p50"],
                [
                    [
                        "polling",
                        _ms(median(latency, "polling")),
                        _ms(median(latency, "polling p99")),
                        "1.00",
                    ],
                    [
                        "LISTEN/NOTIFY wake-up",
                        _ms(median(latency, "wakeup")),
                        _ms(median(latency, "wakeup p99")),
                        str(ratio(latency, "wakeup", "polling")),
                    ],
                ],
            ),
            "Idle cost: statements a dispatcher sends to an empty outbox in one"
            f" {IDLE_SECONDS:.0f}-second window, per second (a count, not a timing, so one"
            " window each; BEGIN/COMMIT are not statements and are not counted; each poll"
            " is one claim statement on PostgreSQL).",
            table(["mode", "statements / s"], [[m, f"{q:.2f}"] for m, q in idle]),
        ]
    )
    write_section("outbox", "Outbox dispatch", body, load=load, rounds=n_rounds)
    print(f"elapsed {time.monotonic() - began:.0f}s")


if __name__ == "__main__":
    main()
