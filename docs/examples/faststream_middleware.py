"""A FastStream handler guarded by the inbox.

Runs anywhere: FastStream's in-memory test broker stands in for RabbitMQ and
a SQLite file for the database. The same code runs on a real RabbitBroker,
RedisBroker (a stream read by a consumer group) or NatsBroker (JetStream).
"""

import asyncio
import tempfile
from datetime import timedelta
from pathlib import Path

from faststream import FastStream
from faststream.rabbit import RabbitBroker, RabbitQueue, TestRabbitBroker
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, func, select
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

import inboxguard
from inboxguard.adapters.faststream import InboxMiddleware, inbox_consumer

database = Path(tempfile.mkdtemp()) / "app.db"
# The Inbox takes a sync engine (schema, checks); the guard writes through the async one.
inbox = inboxguard.Inbox(create_engine(f"sqlite:///{database}"), retention=timedelta(days=7))
inbox.create_schema()
charges = Table("charges", MetaData(), Column("id", String(40)), Column("cents", Integer))
charges.metadata.create_all(inbox.engine)
async_engine = create_async_engine(f"sqlite+aiosqlite:///{database}")

guard = InboxMiddleware(
    inbox,
    consumer="billing.charge",  # declared: the evidence is filed under it
    command_id="command_id",  # a body field, a callable (body, headers), or None (outbox header)
    async_session_factory=async_sessionmaker(async_engine),
    max_attempts=5,
    retry_delay=timedelta(seconds=1),
)
broker = RabbitBroker("amqp://guest:guest@localhost/", middlewares=[guard])
app = FastStream(broker, on_startup=[lambda: guard.check_startup(broker)])


@broker.subscriber(RabbitQueue("charges", durable=True))
async def charge(body: dict) -> dict:
    """Runs once per command, inside the transaction the middleware commits."""
    session = inboxguard.current_session()  # the AsyncSession of the claim
    await session.execute(charges.insert().values(id=body["command_id"], cents=body["amount"]))
    return {"charged": body["amount"]}  # stored as the command's result


@broker.subscriber(RabbitQueue("refunds", durable=True))
@inbox_consumer("billing.refund", command_id=lambda body, headers: headers["x-refund-id"])
async def refund(body: dict) -> None:
    """Files its commands under its own consumer name and command ID."""


async def main() -> None:
    """Deliver one command twice through the in-memory broker: applied once."""
    guard.check_startup(broker)  # what app.run() does through on_startup
    async with TestRabbitBroker(broker) as test_broker:
        for _ in range(2):
            await test_broker.publish({"command_id": "c-1", "amount": 500}, queue="charges")
    async with async_engine.connect() as conn:
        count = (await conn.execute(select(func.count()).select_from(charges))).scalar_one()
    await async_engine.dispose()
    assert count == 1, count
    assert inbox.lookup("billing.charge", "c-1") is not None
    print("charged once")


if __name__ == "__main__":
    asyncio.run(main())
