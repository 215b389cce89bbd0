"""InboxMiddleware inside the test's own event loop, on a real RabbitMQ: per-handler
consumers, the sync guard, command IDs from headers, refusals. SQLite holds the
inbox (the sync guard) and PostgreSQL through asyncpg (the async guard)."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from faststream import BaseMiddleware
from faststream.rabbit import RabbitBroker, RabbitQueue
from sqlalchemy import create_engine, insert
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard import QuarantineReason
from inboxguard.adapters.faststream import (
    COMMAND_ID_HEADER,
    SENT_AT_HEADER,
    InboxMiddleware,
    inbox_consumer,
)
from integrations.payments import async_url, payments_table
from tests.adapters.generic_support import paid
from tests.conftest import AMQP_URL, require_service, unique

from .support import eventually, started

pytestmark = pytest.mark.rabbitmq


@pytest.fixture
def box(sqlite_url: str, prefix: str) -> Iterator[inboxguard.Inbox]:
    require_service("rabbitmq")
    engine = create_engine(sqlite_url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    payments_table(prefix).metadata.create_all(engine)
    yield inbox
    engine.dispose()


def test_f6_each_handler_files_its_commands_under_its_own_consumer(
    box: inboxguard.Inbox,
) -> None:
    """Two handlers behind one broker middleware: inbox_consumer gives each its
    own consumer name and command ID; the body writes through current_session()
    (the sync guard's Session) and commits with the claim."""
    table = payments_table(box.table_prefix)
    ship_q, bill_q = unique("ship"), unique("bill")
    guard = InboxMiddleware(
        box,
        consumer="orders.default",
        command_id="id",
        session_factory=sessionmaker(box.engine),
        retry_delay=dt.timedelta(0),
    )
    settled: list[str] = []
    broker = RabbitBroker(AMQP_URL, middlewares=[counting(settled), guard])
    ran: list[str] = []

    @broker.subscriber(RabbitQueue(ship_q, auto_delete=True))
    @inbox_consumer("orders.ship", command_id="order_id")
    async def ship(body: dict[str, Any]) -> dict[str, Any]:
        ran.append(f"ship-{body['order_id']}")
        inboxguard.current_session().execute(
            insert(table).values(command_id=f"ship-{body['order_id']}", amount=1)
        )
        return {"shipped": body["order_id"]}

    @broker.subscriber(RabbitQueue(bill_q, auto_delete=True))
    @inbox_consumer("orders.bill", command_id=lambda body, headers: headers["x-bill"])
    async def bill(body: dict[str, Any]) -> None:
        ran.append(f"bill-{body['order_id']}")

    guard.check_startup(broker)

    async def scenario() -> None:
        async with started(broker):
            for _ in range(2):  # every message twice: the copies are duplicates
                await broker.publish({"order_id": "o1"}, queue=ship_q)
                await broker.publish({"order_id": "o1"}, queue=bill_q, headers={"x-bill": "b-1"})
            await eventually(lambda: len(settled) == 4, "the four deliveries settled")

    asyncio.run(scenario())
    assert sorted(ran) == ["bill-o1", "ship-o1"]
    assert box.lookup("orders.ship", "o1") is not None
    assert box.lookup("orders.bill", "b-1") is not None
    assert box.lookup("orders.default", "o1") is None
    assert paid(box.engine, box.table_prefix, "ship-o1") == [1]


def counting(settled: list[str]) -> Any:
    """A middleware outside the guard recording each delivery once it is settled."""

    class Count(BaseMiddleware):
        async def consume_scope(self, call_next: Any, msg: Any) -> Any:
            try:
                return await call_next(msg)
            finally:
                settled.append(msg.message_id)

    return Count


def test_f3_refusals_are_quarantined_and_rejected_and_the_worker_goes_on(
    box: inboxguard.Inbox,
) -> None:
    """No command ID, too old, a mismatch: each quarantined under its reason and
    rejected without requeue (the queue is empty afterwards); the good message
    after them is applied."""
    queue = unique("refuse")
    guard = InboxMiddleware(
        box, consumer="pay", command_id=None, session_factory=sessionmaker(box.engine)
    )
    broker = RabbitBroker(AMQP_URL, middlewares=[guard])
    ran: list[Any] = []

    @broker.subscriber(RabbitQueue(queue, durable=True))
    async def handle(body: dict[str, Any]) -> None:
        ran.append(body)

    old = (dt.datetime.now(dt.UTC) - dt.timedelta(days=30)).isoformat()
    left: list[int] = []

    async def scenario() -> None:
        async with started(broker):
            await broker.publish({"n": 0}, queue=queue)  # no x-inbox-command-id header
            await broker.publish(
                {"n": 1}, queue=queue, headers={COMMAND_ID_HEADER: "c1", SENT_AT_HEADER: old}
            )
            await broker.publish({"n": 2}, queue=queue, headers={COMMAND_ID_HEADER: "c2"})
            await broker.publish({"n": 3}, queue=queue, headers={COMMAND_ID_HEADER: "c2"})
            await broker.publish({"n": 4}, queue=queue, headers={COMMAND_ID_HEADER: "c4"})
            await eventually(lambda: box.lookup("pay", "c4") is not None, "the last message")
            await asyncio.sleep(0.3)  # a requeued refusal would be back by now
            declared = await broker.declare_queue(RabbitQueue(queue, durable=True))
            left.append(declared.declaration_result.message_count)
            await declared.delete(if_unused=False)

    asyncio.run(scenario())
    assert ran == [{"n": 2}, {"n": 4}]
    assert left == [0]
    reasons = sorted(r.reason for r in box.quarantined())
    assert reasons == sorted(
        [
            QuarantineReason.BEYOND_RETENTION,
            QuarantineReason.PAYLOAD_MISMATCH,
            "invalid_command",
        ]
    )


@pytest.mark.postgresql
def test_f7_the_async_guard_stamps_and_reads_the_sent_time(pg_url: str, prefix: str) -> None:
    """With async_session_factory the body runs on the AsyncSession the guard
    opened; a publish through a broker carrying the middleware is stamped with
    x-inbox-sent-at, which the consumer reads."""
    require_service("rabbitmq")
    engine = create_engine(pg_url)
    box = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    box.create_schema()
    table = payments_table(prefix)
    table.metadata.create_all(engine)
    queue = unique("async")
    seen: list[Any] = []

    async def scenario() -> None:
        aengine = create_async_engine(async_url(pg_url))
        guard = InboxMiddleware(
            box,
            consumer="pay",
            command_id=lambda body, headers: body["id"],
            async_session_factory=async_sessionmaker(aengine),
            require_sent_at=True,
        )
        broker = RabbitBroker(AMQP_URL, middlewares=[guard])

        @broker.subscriber(RabbitQueue(queue, auto_delete=True))
        async def handle(body: dict[str, Any]) -> None:
            session = inboxguard.current_session()
            seen.append(type(session).__name__)
            await session.execute(insert(table).values(command_id=body["id"], amount=2))

        async with started(broker):
            await broker.publish({"id": "a1"}, queue=queue)
            await eventually(lambda: paid(engine, prefix, "a1"), "a1 applied")
        await aengine.dispose()

    try:
        asyncio.run(scenario())
        assert seen == ["AsyncSession"]
        assert box.quarantined() == []  # require_sent_at=True: the stamp was there
        record = box.lookup("pay", "a1")
        assert record is not None
    finally:
        box.drop_schema()
        table.drop(engine)
        engine.dispose()


def test_f4_a_retry_whose_copy_cannot_be_published_goes_back_to_the_broker(
    box: inboxguard.Inbox, caplog: pytest.LogCaptureFixture
) -> None:
    """The handler fails once and the broker connection cannot take the retry
    copy: the original is neither acked nor rejected but requeued, delivered
    again, and applied once."""
    table = payments_table(box.table_prefix)
    queue = unique("nocopy")
    guard = InboxMiddleware(
        box,
        consumer="pay",
        command_id="id",
        session_factory=sessionmaker(box.engine),
        retry_delay=dt.timedelta(0),
    )
    broker = RabbitBroker(AMQP_URL, middlewares=[guard])
    attempts: list[str] = []

    @broker.subscriber(RabbitQueue(queue, auto_delete=True))
    async def flaky(body: dict[str, Any]) -> None:
        attempts.append(body["id"])
        inboxguard.current_session().execute(insert(table).values(command_id=body["id"], amount=1))
        if len(attempts) == 1:
            raise ConnectionResetError("lost mid-transaction")

    async def scenario() -> None:
        async with started(broker):
            await broker.publish({"id": "n1"}, queue=queue)
            real_publish = broker.publish

            async def broken(*args: Any, **kwargs: Any) -> Any:
                broker.publish = real_publish  # type: ignore[method-assign]
                raise ConnectionResetError("the broker connection is gone")

            broker.publish = broken  # type: ignore[method-assign]
            await eventually(lambda: paid(box.engine, box.table_prefix, "n1"), "n1 applied")

    with caplog.at_level(logging.ERROR, logger="inboxguard.faststream"):
        asyncio.run(scenario())
    assert "could not retry a delivery" in caplog.text
    assert attempts == ["n1", "n1"]
    assert paid(box.engine, box.table_prefix, "n1") == [1]
    assert box.quarantined() == []
