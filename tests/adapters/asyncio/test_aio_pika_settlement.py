"""aio-pika on RabbitMQ: a retry copy goes back to the queue it came from (A13).

The queue is bound to a topic exchange under ``payment.created``; the
callback publishes its copies through ``channel.default_exchange``, as the
asyncio page and the reference app do. SQLite holds the inbox.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

import inboxguard
from inboxguard.adapters.aio_pika import COMMAND_ID_HEADER, SENT_AT_HEADER, guarded
from inboxguard.errors import ConfigurationError
from tests.conftest import AMQP_URL, require_service, unique

pytestmark = [pytest.mark.rabbitmq]


@pytest.fixture
def box(tmp_path: Path, prefix: str) -> Iterator[inboxguard.Inbox]:
    require_service("rabbitmq")
    engine = create_engine(f"sqlite:///{tmp_path / 'inbox.db'}")
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    yield inbox
    engine.dispose()


async def _through_topic(
    box: inboxguard.Inbox, fails: int, *, pass_queue: bool, named: bool = False
) -> list[int]:
    """Publish one command through a topic exchange; its handler raises
    ``fails`` times. The callback copies through the default exchange (with
    or without ``queue``), or through the topic exchange itself (``named``).
    Return the attempts the handler saw once the command is applied (or 30 s
    passed)."""
    aengine = create_async_engine(f"sqlite+aiosqlite:///{box.engine.url.database}")
    connection = await aio_pika.connect(AMQP_URL)
    name = unique("aq")
    attempts: list[int] = []
    try:
        channel = await connection.channel()
        topic = await channel.declare_exchange(
            name + ".events", aio_pika.ExchangeType.TOPIC, auto_delete=True
        )
        queue = await channel.declare_queue(name, auto_delete=True)
        await queue.bind(topic, routing_key="payment.created")

        async def handler(body: Any, message: AbstractIncomingMessage) -> None:
            attempts.append(len(attempts) + 1)
            if len(attempts) <= fails:
                raise RuntimeError("the payment service hiccupped")

        callback = guarded(
            handler,
            box,
            session_factory=async_sessionmaker(aengine),
            consumer="payments",
            exchange=topic if named else channel.default_exchange,
            retry_delay=dt.timedelta(0),
            **({"queue": queue} if pass_queue else {}),
        )
        await queue.consume(callback)
        now = dt.datetime.now(dt.UTC).isoformat()
        headers = {COMMAND_ID_HEADER: "pay-1", SENT_AT_HEADER: now}
        await topic.publish(
            aio_pika.Message(b'{"n": 1}', headers=headers),
            routing_key="payment.created",
        )
        deadline = asyncio.get_running_loop().time() + 30
        # Looked up off the loop: the guard's aiosqlite commit needs the loop.
        while await asyncio.to_thread(box.lookup, "payments", "pay-1") is None:
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.05)
        return attempts
    finally:
        await connection.close()
        await aengine.dispose()


@pytest.mark.parametrize("pass_queue", [True, False], ids=["queue-given", "no-queue"])
def test_a13_a_retry_copy_returns_to_the_queue_the_delivery_came_from(
    box: inboxguard.Inbox, pass_queue: bool
) -> None:
    """A handler that raises twice: its copies come back to the queue (with
    ``queue=``), or the original is handed back to the broker (without it),
    and the command is applied on the third attempt, never dropped."""
    attempts = asyncio.run(_through_topic(box, fails=2, pass_queue=pass_queue))
    assert attempts == [1, 2, 3]
    assert box.lookup("payments", "pay-1") is not None
    assert box.quarantined("payments") == []


def test_a15_a_named_exchange_copies_back_under_the_deliverys_routing_key(
    box: inboxguard.Inbox,
) -> None:
    """The third accepted route: ``exchange=`` the topic exchange the queue is
    bound to. A handler that raises twice has its copies published there
    under ``payment.created``, which reaches the queue again, and the command
    is applied on the third attempt, never dropped or quarantined."""
    attempts = asyncio.run(_through_topic(box, fails=2, pass_queue=False, named=True))
    assert attempts == [1, 2, 3]
    assert box.lookup("payments", "pay-1") is not None
    assert box.quarantined("payments") == []


def test_a13_a_queue_that_is_not_a_queue_is_refused(box: inboxguard.Inbox) -> None:
    """``queue=`` must name the consumed queue: anything else is refused at declaration."""

    async def handler(body: Any, message: AbstractIncomingMessage) -> None:
        return None

    with pytest.raises(ConfigurationError, match="queue must be"):
        guarded(
            handler,
            box,
            session_factory=lambda: None,  # type: ignore[arg-type,return-value]
            consumer="payments-bad",
            exchange=object(),  # type: ignore[arg-type]
            queue=42,  # type: ignore[arg-type]
        )


async def _auto_acked(box: inboxguard.Inbox) -> list[Any]:
    """Consume one message with ``no_ack=True``; return what the handler saw
    once a quarantine record holds it (or 30 s passed)."""
    aengine = create_async_engine(f"sqlite+aiosqlite:///{box.engine.url.database}")
    connection = await aio_pika.connect(AMQP_URL)
    ran: list[Any] = []
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue(unique("aq-noack"), auto_delete=True)

        async def handler(body: Any, message: AbstractIncomingMessage) -> None:
            ran.append(body)

        callback = guarded(
            handler,
            box,
            session_factory=async_sessionmaker(aengine),
            consumer="auto-acked",
            exchange=channel.default_exchange,
            queue=queue,
        )
        await queue.consume(callback, no_ack=True)
        await channel.default_exchange.publish(
            aio_pika.Message(b'{"n": 1}', headers={COMMAND_ID_HEADER: "pay-1"}),
            routing_key=queue.name,
        )
        deadline = asyncio.get_running_loop().time() + 30
        while not await asyncio.to_thread(box.quarantined, "auto-acked"):
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.05)
        return ran
    finally:
        await connection.close()
        await aengine.dispose()


def test_a14_a_no_ack_consumer_is_quarantined_never_run(box: inboxguard.Inbox) -> None:
    """``queue.consume(callback, no_ack=True)``: RabbitMQ forgot the message as
    it delivered it, so no retry or reject could keep it. The callback sees
    that on the delivery and quarantines it (``configuration``) without
    running the handler, instead of applying it with nothing to fall back on."""
    ran = asyncio.run(_auto_acked(box))
    assert ran == []
    [record] = box.quarantined("auto-acked")
    assert record.reason == "configuration"
