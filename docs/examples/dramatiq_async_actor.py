"""An async def Dramatiq actor, guarded with an AsyncSession (StubBroker, SQLite)."""

import datetime as dt
import tempfile
from pathlib import Path

import dramatiq
from dramatiq import Worker
from dramatiq.brokers.stub import StubBroker
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, func, insert, select
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.dramatiq import InboxMiddleware

database = Path(tempfile.mkdtemp()) / "app.db"
engine = create_engine(f"sqlite:///{database}")
inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=54))
shipments = Table(
    "shipments", MetaData(), Column("order_id", String(40)), Column("sku", String(20)),
    Column("qty", Integer),
)  # fmt: skip
broker = StubBroker()

# --8<-- [start:async]
from dramatiq.middleware import AsyncIO
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

async_engine = create_async_engine(f"sqlite+aiosqlite:///{database}")  # same database
broker.add_middleware(AsyncIO())
broker.add_middleware(  # the one InboxMiddleware of the broker, with both factories
    InboxMiddleware(
        inbox,
        session_factory=sessionmaker(engine),
        async_session_factory=async_sessionmaker(async_engine),
    )
)
dramatiq.set_broker(broker)


@dramatiq.actor(inbox_command_id="order_id", inbox_consumer="shipping.ship_async")
async def ship_async(order_id: str, sku: str, qty: int) -> dict[str, object]:
    session = inboxguard.current_session()  # the AsyncSession of the guard
    await session.execute(insert(shipments).values(order_id=order_id, sku=sku, qty=qty))
    return {"order_id": order_id, "shipped": qty}


# --8<-- [end:async]


inbox.create_schema()
shipments.metadata.create_all(engine)
broker.emit_after("process_boot")
worker = Worker(broker, worker_timeout=50, worker_threads=1)
worker.start()
try:
    ship_async.send("o-2", "PEN-3", 1)
    ship_async.send("o-2", "PEN-3", 1)  # a duplicate: skipped
    broker.join(ship_async.queue_name)
    worker.join()
finally:
    worker.stop()
    broker.emit_before("process_stop")
with engine.connect() as conn:
    assert conn.scalar(select(func.count()).select_from(shipments)) == 1
