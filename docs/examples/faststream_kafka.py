"""FastStream Kafka subscribers guarded by the inbox: one message at a time, and
a batch subscriber claimed in one transaction per batch.

Runs anywhere: FastStream's in-memory test broker stands in for Kafka and a
SQLite file for the database. On a real KafkaBroker the same code commits
each offset only after its transaction commits.
"""

import asyncio
import tempfile
from datetime import timedelta
from pathlib import Path

from faststream import AckPolicy
from faststream.kafka import KafkaBroker, TestKafkaBroker
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, func, select
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

import inboxguard
from inboxguard.adapters.faststream import InboxMiddleware, current_batch, inbox_consumer

database = Path(tempfile.mkdtemp()) / "app.db"
inbox = inboxguard.Inbox(create_engine(f"sqlite:///{database}"), retention=timedelta(days=7))
inbox.create_schema()
charges = Table("charges", MetaData(), Column("id", String(40)), Column("cents", Integer))
charges.metadata.create_all(inbox.engine)
async_engine = create_async_engine(f"sqlite+aiosqlite:///{database}")

# --8<-- [start:kafka]
guard = InboxMiddleware(
    inbox,
    consumer="billing.charge",
    command_id="command_id",
    async_session_factory=async_sessionmaker(async_engine),
    dead_letter_topic="charges.dlq",  # refused messages go here before their offset is committed
)
broker = KafkaBroker("localhost:9092", middlewares=[guard])


@broker.subscriber("charges", group_id="billing", ack_policy=AckPolicy.MANUAL)
async def charge(body: dict) -> dict:
    """Runs once per command; the offset is committed after the transaction."""
    session = inboxguard.current_session()
    await session.execute(charges.insert().values(id=body["command_id"], cents=body["amount"]))
    return {"charged": body["amount"]}


# --8<-- [end:kafka]


# --8<-- [start:batch]
@broker.subscriber("refunds", group_id="billing", ack_policy=AckPolicy.MANUAL, batch=True)
@inbox_consumer("billing.refund")
async def refund_many(bodies: list[dict]) -> None:
    """One transaction per polled batch: apply the fresh entries only."""
    session = inboxguard.current_session()
    for entry in current_batch().fresh:
        await session.execute(
            charges.insert().values(id=entry.command_id, cents=-entry.payload["amount"])
        )
        entry.result = {"refunded": entry.payload["amount"]}


# --8<-- [end:batch]


async def main() -> None:
    """Deliver each command twice: applied once."""
    guard.check_startup(broker)
    async with TestKafkaBroker(broker) as test_broker:
        for _ in range(2):
            await test_broker.publish({"command_id": "c-1", "amount": 500}, topic="charges")
            await test_broker.publish({"command_id": "r-1", "amount": 200}, topic="refunds")
    async with async_engine.connect() as conn:
        count = (await conn.execute(select(func.count()).select_from(charges))).scalar_one()
    await async_engine.dispose()
    assert count == 2, count
    assert inbox.lookup("billing.charge", "c-1") is not None
    assert inbox.lookup("billing.refund", "r-1") is not None
    print("charged once, refunded once")


if __name__ == "__main__":
    asyncio.run(main())
