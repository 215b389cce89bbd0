"""The aio-pika consumer on RabbitMQ (issue 19): the outbox's command ID header by
default, ``require_sent_at``, and a declared failure tried once, quarantined and
dead-lettered. SQLite holds the inbox (aiosqlite for the guard)."""

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
from tests.conftest import AMQP_URL, require_service, unique


@pytest.fixture
def box(tmp_path: Path, prefix: str) -> Iterator[inboxguard.Inbox]:
    require_service("rabbitmq")
    engine = create_engine(f"sqlite:///{tmp_path / 'inbox.db'}")
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    yield inbox
    engine.dispose()


async def _consume(
    box: inboxguard.Inbox, headers: dict[str, Any], handler: Any, dead: int, **options: Any
) -> tuple[int, int]:
    """Publish one message and consume it; once it is settled and the dead-letter
    queue holds ``dead`` messages (or 5 s passed), return how many messages the
    main queue and the dead-letter queue hold."""
    aengine = create_async_engine(f"sqlite+aiosqlite:///{box.engine.url.database}")
    connection = await aio_pika.connect(AMQP_URL)
    name = unique("aq")
    try:
        channel = await connection.channel()
        dlq = name + ".dead"
        await channel.declare_queue(dlq, auto_delete=True)
        queue = await channel.declare_queue(
            name,
            auto_delete=True,
            arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq},
        )
        settled = asyncio.Event()
        callback = guarded(
            handler,
            box,
            session_factory=async_sessionmaker(aengine),
            consumer="orders",
            exchange=channel.default_exchange,
            retry_delay=dt.timedelta(0),
            **options,
        )

        async def observe(message: AbstractIncomingMessage) -> None:
            await callback(message)
            settled.set()

        await queue.consume(observe)
        body = b'{"n": 1}'
        await channel.default_exchange.publish(
            aio_pika.Message(body, headers=headers), routing_key=name
        )
        await asyncio.wait_for(settled.wait(), timeout=10)
        deadline = asyncio.get_running_loop().time() + 5
        while True:
            counts = [
                (await channel.declare_queue(q, passive=True)).declaration_result.message_count
                for q in (name, dlq)
            ]
            if counts[1] >= dead or asyncio.get_running_loop().time() > deadline:
                return counts[0] or 0, counts[1] or 0
            await asyncio.sleep(0.05)
    finally:
        await connection.close()
        await aengine.dispose()


def test_the_outbox_command_id_header_is_the_default(box: inboxguard.Inbox) -> None:
    async def handler(body: Any, message: AbstractIncomingMessage) -> None:
        return None

    now = dt.datetime.now(dt.UTC).isoformat()
    headers = {COMMAND_ID_HEADER: "order-1", SENT_AT_HEADER: now}
    assert asyncio.run(_consume(box, headers, handler, dead=0)) == (0, 0)
    assert box.lookup("orders", "order-1") is not None


def test_require_sent_at_refuses_a_message_without_one(box: inboxguard.Inbox) -> None:
    async def handler(body: Any, message: AbstractIncomingMessage) -> None:
        raise AssertionError("never runs")

    outcome = asyncio.run(
        _consume(box, {COMMAND_ID_HEADER: "order-2"}, handler, dead=1, require_sent_at=True)
    )
    assert outcome == (0, 1)
    [record] = box.quarantined("orders")
    assert (record.command_id, record.reason) == ("order-2", "missing_sent_at")


def test_a_declared_failure_is_tried_once_quarantined_and_dead_lettered(
    box: inboxguard.Inbox,
) -> None:
    calls: list[int] = []

    async def handler(body: Any, message: AbstractIncomingMessage) -> None:
        calls.append(1)
        raise inboxguard.ReconciliationRequiredError("operator needed", effect_key="k1")

    now = dt.datetime.now(dt.UTC).isoformat()
    headers = {COMMAND_ID_HEADER: "order-3", SENT_AT_HEADER: now}
    assert asyncio.run(_consume(box, headers, handler, dead=1, max_attempts=3)) == (0, 1)
    assert calls == [1]
    [record] = box.quarantined("orders")
    assert (record.command_id, record.reason) == ("order-3", "reconciliation_required")
