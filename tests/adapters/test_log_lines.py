"""P20: a refusal an adapter handled is one structured WARNING line (consumer,
command ID, reason, both digests, what was done, the docs anchor), its
traceback only at DEBUG; a duplicate is one INFO line. Checked on kombu's
in-memory transport, on Dramatiq's StubBroker with a real worker and on
FastStream with a real RabbitMQ, SQLite holding the inbox (the Celery worker
is checked in celery/test_celery_log_lines.py)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from typing import Any

import dramatiq
import pytest
from dramatiq import Worker
from dramatiq.brokers.stub import StubBroker
from kombu import Connection, Consumer, Producer, Queue
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.dramatiq import InboxMiddleware
from inboxguard.adapters.kombu import guarded
from tests.conftest import AMQP_URL, require_service, unique

CONSUMER = "orders.apply"


@pytest.fixture
def box(sqlite_url: str, prefix: str) -> Iterator[inboxguard.Inbox]:
    engine = create_engine(sqlite_url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    yield inbox
    engine.dispose()


def kombu_deliveries(box: inboxguard.Inbox, bodies: list[dict[str, Any]]) -> None:
    callback = guarded(
        lambda body, message: None,
        box,
        session_factory=sessionmaker(box.engine),
        command_id="order_id",
        consumer=CONSUMER,
    )
    queue = Queue(unique("q"))
    with Connection("memory://") as conn:
        for body in bodies:
            Producer(conn).publish(body, routing_key=queue.name, declare=[queue], serializer="json")
            with Consumer(conn, queues=[queue], callbacks=[callback], accept=["json"]):
                conn.drain_events(timeout=5)


def dramatiq_deliveries(box: inboxguard.Inbox, bodies: list[dict[str, Any]]) -> None:
    broker = StubBroker()
    broker.emit_after("process_boot")
    broker.add_middleware(InboxMiddleware(box, session_factory=sessionmaker(box.engine)))

    @dramatiq.actor(
        broker=broker, max_retries=0, inbox_command_id="order_id", inbox_consumer=CONSUMER
    )
    def apply(order_id: str, qty: int) -> None:
        return None

    worker = Worker(broker, worker_timeout=50, worker_threads=1)
    worker.start()
    try:
        for body in bodies:
            apply.send(**body)
            broker.join(apply.queue_name, fail_fast=False)
            worker.join()
    finally:
        worker.stop()
        broker.close()


def faststream_deliveries(box: inboxguard.Inbox, bodies: list[dict[str, Any]]) -> None:
    """On a real RabbitMQ (skipped, or failed in CI, when it is down)."""
    require_service("rabbitmq")
    import asyncio

    from faststream.rabbit import RabbitBroker, RabbitQueue

    from inboxguard.adapters.faststream import InboxMiddleware as FastStreamInbox
    from tests.adapters.faststream.support import eventually, started

    guard = FastStreamInbox(
        box, consumer=CONSUMER, command_id="order_id", session_factory=sessionmaker(box.engine)
    )
    broker = RabbitBroker(AMQP_URL, middlewares=[guard])
    queue, seen = unique("q"), []

    @broker.subscriber(RabbitQueue(queue, auto_delete=True))
    async def apply(body: dict[str, Any]) -> None:
        seen.append(body)

    async def scenario() -> None:
        async with started(broker):
            for number, body in enumerate(bodies, 1):
                await broker.publish(body, queue=queue)
                await eventually(
                    lambda n=number: len(seen) + box_settled(box) >= n, f"delivery {number}"
                )

    def box_settled(inbox: inboxguard.Inbox) -> int:
        # deliveries the handler did not see: skipped duplicates and quarantined copies
        return duplicates[0] + len(inbox.quarantined(CONSUMER))

    duplicates = [0]
    handler = _Counting(duplicates)
    logging.getLogger("inboxguard.faststream").addHandler(handler)
    try:
        asyncio.run(scenario())
    finally:
        logging.getLogger("inboxguard.faststream").removeHandler(handler)


class _Counting(logging.Handler):
    """Counts the duplicate lines as they are logged."""

    def __init__(self, counter: list[int]) -> None:
        super().__init__(logging.INFO)
        self.counter = counter

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("duplicate:"):
            self.counter[0] += 1


@pytest.mark.parametrize(
    "deliver",
    [kombu_deliveries, dramatiq_deliveries, faststream_deliveries],
    ids=["kombu", "dramatiq", "faststream"],
)
def test_p20_one_line_per_refusal_and_per_duplicate(
    box: inboxguard.Inbox, caplog: pytest.LogCaptureFixture, deliver: Any
) -> None:
    first, changed = {"order_id": "o-1", "qty": 3}, {"order_id": "o-1", "qty": 4}
    with caplog.at_level(logging.DEBUG):
        deliver(box, [first, first, changed])
    [record] = box.quarantined(CONSUMER)
    ours = [r for r in caplog.records if r.name.startswith("inboxguard")]
    shown = [r for r in caplog.records if r.levelno >= logging.INFO and "o-1" in r.getMessage()]
    [duplicate] = [r for r in shown if r.getMessage().startswith("duplicate:")]
    assert duplicate.levelno == logging.INFO
    # The framework's own INFO lines (Dramatiq's "expected exception") stay.
    [refusal] = [r for r in shown if r.levelno >= logging.WARNING]
    assert refusal.levelno == logging.WARNING
    text = refusal.getMessage()
    for field in (
        f"consumer={CONSUMER}",
        "command_id=o-1",
        "reason=payload_mismatch",
        f"stored_digest={record.stored_digest}",
        f"incoming_digest={record.incoming_digest}",
        "dead-lettered",
        "docs/errors.md#payload-mismatch",
    ):
        assert field in text
    assert refusal.__dict__["incoming_digest"] == record.incoming_digest  # structured too
    assert not [r for r in caplog.records if r.levelno >= logging.INFO and r.exc_info]
    assert [r for r in ours if r.levelno == logging.DEBUG and r.exc_info]


def aio_pika_deliveries(box: inboxguard.Inbox, bodies: list[dict[str, Any]]) -> None:
    """On a real RabbitMQ, through the default exchange."""
    require_service("rabbitmq")
    import asyncio
    import json

    import aio_pika
    from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

    from inboxguard.adapters.aio_pika import guarded as guarded_async
    from tests.adapters.faststream.support import eventually

    async def scenario() -> None:
        aengine = create_async_engine(f"sqlite+aiosqlite:///{box.engine.url.database}")
        connection = await aio_pika.connect(AMQP_URL)
        try:
            channel = await connection.channel()
            queue = await channel.declare_queue(unique("q"), auto_delete=True)
            settled: list[object] = []

            async def handler(body: Any, message: Any) -> None:
                settled.append(body)

            callback = guarded_async(
                handler,
                box,
                session_factory=async_sessionmaker(aengine),
                command_id="order_id",
                consumer=CONSUMER,
                exchange=channel.default_exchange,
                queue=queue,
            )
            await queue.consume(callback)
            for number, body in enumerate(bodies, 1):
                await channel.default_exchange.publish(
                    aio_pika.Message(json.dumps(body).encode()), routing_key=queue.name
                )
                await eventually(
                    lambda n=number: (
                        len(settled) + len(box.quarantined(CONSUMER))  # quarantined copies
                        >= n
                    ),
                    f"delivery {number}",
                )
        finally:
            await connection.close()
            await aengine.dispose()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "deliver",
    [kombu_deliveries, aio_pika_deliveries, faststream_deliveries],
    ids=["kombu", "aio-pika", "faststream"],
)
def test_p25_a_refusal_the_inbox_did_not_quarantine_names_the_configured_consumer(
    box: inboxguard.Inbox, caplog: pytest.LogCaptureFixture, deliver: Any
) -> None:
    """A message with no usable command ID: the inbox never saw a command, so
    the error carries no consumer; the ERROR line names the consumer the
    adapter was configured with, as the quarantine record does."""
    with caplog.at_level(logging.INFO):
        deliver(box, [{"qty": 3}])
    [record] = box.quarantined(CONSUMER)
    assert record.consumer == CONSUMER
    [refusal] = [r for r in caplog.records if r.getMessage().startswith("refused:")]
    assert refusal.levelno == logging.ERROR
    assert f"consumer={CONSUMER} " in refusal.getMessage()
    assert refusal.__dict__["consumer"] == CONSUMER  # structured too
