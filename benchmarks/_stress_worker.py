"""One worker process of the stress run (``benchmarks/stress.py``).

A kombu consumer on RabbitMQ, wrapped by :func:`inboxguard.adapters.kombu.guarded`
exactly as the reference consumer is (small prefetch, ack after the commit).
Each command moves money: one UPDATE of its account and one INSERT into the
ledger, in the guard's transaction.

Per delivery the worker times the guard's entry (the claim statement and its
decision, whatever the outcome) and appends ``OUTCOME MICROSECONDS`` lines to
its stats file, flushed every few hundred deliveries and at a graceful stop.
A SIGKILL loses the unflushed tail of samples, never a command.

    python -m benchmarks._stress_worker '<json settings>'
"""

from __future__ import annotations

import datetime as dt
import json
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, TextIO

from kombu import Connection, Exchange, Queue
from kombu.mixins import ConsumerProducerMixin
from sqlalchemy import BigInteger, Column, Integer, MetaData, String, Table, create_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.kombu import guarded

#: The consumer name the evidence is filed under.
CONSUMER = "stress.transfer"
RETENTION = dt.timedelta(days=7)

#: Outcome codes of the stats lines.
FRESH, DUPLICATE, MISMATCH, BUSY, OTHER = "F", "D", "M", "B", "E"


def business_tables(prefix: str, metadata: MetaData | None = None) -> tuple[Table, Table]:
    """The accounts and the ledger. The ledger has no unique key on the
    command, so a command applied twice shows as two rows."""
    metadata = metadata or MetaData()
    accounts = Table(
        f"{prefix}accounts",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("balance", BigInteger, nullable=False),
    )
    ledger = Table(
        f"{prefix}ledger",
        metadata,
        Column("id", BigInteger, primary_key=True, autoincrement=True),
        Column("command_id", String(40), nullable=False),
        Column("account", Integer, nullable=False),
        Column("amount", Integer, nullable=False),
        Column("version", Integer, nullable=False),
    )
    return accounts, ledger


def dead_queue(queue: str) -> Queue:
    """Where a rejected (quarantined) message is dead-lettered."""
    exchange = Exchange(f"{queue}.dlx", type="direct", durable=True)
    return Queue(f"{queue}.dead", exchange, routing_key=f"{queue}.dead", durable=True)


def work_queue(queue: str) -> Queue:
    """The commands' queue (default exchange), dead-lettering to :func:`dead_queue`."""
    return Queue(
        queue,
        durable=True,
        queue_arguments={
            "x-dead-letter-exchange": f"{queue}.dlx",
            "x-dead-letter-routing-key": f"{queue}.dead",
        },
    )


class Samples:
    """Guard-entry timings, appended to a file in batches."""

    def __init__(self, path: str, batch: int = 256, every: float = 1.0) -> None:
        self.file: TextIO = open(path, "a")  # noqa: SIM115 - closed by close()
        self.batch = batch
        self.every = every
        self.lines: list[str] = []
        self.flushed = time.monotonic()

    def add(self, outcome: str, seconds: float) -> None:
        self.lines.append(f"{outcome} {int(seconds * 1_000_000)}\n")
        if len(self.lines) >= self.batch or time.monotonic() - self.flushed >= self.every:
            self.flush()

    def flush(self) -> None:
        if self.lines:
            self.file.write("".join(self.lines))
            self.file.flush()
            self.lines.clear()
        self.flushed = time.monotonic()

    def close(self) -> None:
        self.flush()
        self.file.close()


class TimedInbox(inboxguard.Inbox):
    """The inbox, timing each guard entry (the claim and its decision)."""

    samples: Samples

    @contextmanager
    def guard(self, session: Any, **kwargs: Any) -> Iterator[inboxguard.InboxEntry]:  # type: ignore[override]
        start = time.perf_counter()
        outcome = OTHER
        with ExitStack() as stack:
            try:
                entry = stack.enter_context(super().guard(session, **kwargs))
                outcome = DUPLICATE if entry.duplicate else FRESH
            except inboxguard.PayloadMismatchError:
                outcome = MISMATCH
                raise
            except inboxguard.InProgressError:
                outcome = BUSY
                raise
            finally:
                self.samples.add(outcome, time.perf_counter() - start)
            yield entry


class Worker(ConsumerProducerMixin):
    """Consumes the work queue; retry copies go out on the producer connection."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.connection = Connection(settings["broker_url"])
        engine = create_engine(settings["db_url"], pool_size=1, max_overflow=1)
        self.inbox = TimedInbox(
            engine,
            retention=RETENTION,
            table_prefix=settings["prefix"],
            lock_timeout=dt.timedelta(milliseconds=settings["lock_timeout_ms"]),
        )
        self.inbox.samples = Samples(settings["stats"])
        self.accounts, self.ledger = business_tables(settings["prefix"])
        self.on_message = guarded(
            self.transfer,
            self.inbox,
            session_factory=sessionmaker(engine),
            command_id="command_id",
            consumer=CONSUMER,
            max_attempts=settings["max_attempts"],
            retry_delay=dt.timedelta(milliseconds=settings["retry_delay_ms"]),
            producer=lambda: self.producer,
        )

    def get_consumers(self, consumer_cls: Any, channel: Any) -> list[Any]:
        return [
            consumer_cls(
                queues=[work_queue(self.settings["queue"])],
                callbacks=[self.on_message],
                accept=["json"],
                prefetch_count=self.settings["prefetch"],
            )
        ]

    def transfer(self, body: dict[str, Any], message: Any) -> None:
        session = inboxguard.current_session()
        session.execute(
            self.accounts.update()
            .where(self.accounts.c.id == body["account"])
            .values(balance=self.accounts.c.balance + body["amount"])
        )
        session.execute(
            self.ledger.insert().values(
                command_id=body["command_id"],
                account=body["account"],
                amount=body["amount"],
                version=body["version"],
            )
        )

    def on_consume_ready(self, connection: Any, channel: Any, consumers: Any, **kw: Any) -> None:
        print("ready", flush=True)


def main(argv: list[str]) -> None:
    worker = Worker(json.loads(argv[0]))

    def stop(signum: int, frame: Any) -> None:
        worker.should_stop = True

    signal.signal(signal.SIGTERM, stop)
    try:
        worker.run()
    finally:
        worker.inbox.samples.close()
    print("stopped", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
