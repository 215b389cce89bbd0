"""An aio-pika consumer guarded by the inbox, against RabbitMQ.

# needs: rabbitmq
Set INBOXGUARD_AMQP_URL to reach another broker. The script publishes one
command twice to a queue of its own, consumes until the command is applied,
and deletes the queue.
"""

import asyncio
import os
import tempfile
import uuid
from datetime import timedelta
from pathlib import Path

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, func, select
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

import inboxguard

AMQP_URL = os.environ.get("INBOXGUARD_AMQP_URL", "amqp://guest:guest@localhost/")
QUEUE = f"charges-{uuid.uuid4().hex[:8]}"
database = Path(tempfile.mkdtemp()) / "app.db"
engine = create_async_engine(f"sqlite+aiosqlite:///{database}")
sessions = async_sessionmaker(engine)
inbox = inboxguard.Inbox(create_engine(f"sqlite:///{database}"), retention=timedelta(days=7))
charges = Table("charges", MetaData(), Column("id", String(40)), Column("cents", Integer))

# --8<-- [start:consumer]
from datetime import timedelta

import aio_pika

from inboxguard.adapters.aio_pika import guarded


async def charge(body: dict, message) -> dict:
    session = inboxguard.current_session()
    await session.execute(charges.insert().values(id=body["command_id"], cents=body["amount"]))
    return {"charged": body["amount"]}


async def main() -> None:
    connection = await aio_pika.connect_robust(AMQP_URL)  # "amqp://guest:guest@localhost/"
    async with connection:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=10)
        queue = await channel.declare_queue(QUEUE, durable=True)
        on_message = guarded(
            charge,
            inbox,
            session_factory=sessions,
            command_id="command_id",  # omit to read the outbox's x-inbox-command-id
            consumer="billing.charge",
            exchange=channel.default_exchange,  # where retry copies go...
            queue=queue,  # ...under this queue's name: back to where they came from
            max_attempts=5,
            retry_delay=timedelta(seconds=1),
        )
        # --8<-- [end:consumer]
        on_message = counted(on_message)
        # --8<-- [start:consume]
        await queue.consume(on_message)
        # a worker now waits until it is stopped: await asyncio.Future()
        # --8<-- [end:consume]
        await publish_twice(channel)
        await asyncio.wait_for(wait_settled(2), timeout=30)
        await queue.delete(if_unused=False, if_empty=False)


settled = 0


def counted(callback):
    """Count deliveries the guarded callback has settled (acked or rejected)."""

    async def wrapper(message) -> None:
        global settled
        await callback(message)
        settled += 1

    return wrapper


async def wait_settled(count: int) -> None:
    while settled < count:
        await asyncio.sleep(0.02)


async def publish_twice(channel) -> None:
    body = b'{"command_id": "charge-1", "amount": 1500}'
    for _ in range(2):
        await channel.default_exchange.publish(aio_pika.Message(body), routing_key=QUEUE)


async def run() -> None:
    async with engine.begin() as conn:
        await conn.run_sync(inbox.tables.metadata.create_all)
        await conn.run_sync(charges.metadata.create_all)
    await main()
    async with engine.connect() as conn:
        assert await conn.scalar(select(func.count()).select_from(charges)) == 1
    await engine.dispose()


asyncio.run(run())
