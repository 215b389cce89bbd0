"""A guarded Dramatiq actor on the StubBroker and a SQLite file."""

import tempfile
from pathlib import Path

from dramatiq import Worker
from dramatiq.brokers.stub import StubBroker
from sqlalchemy import Column, Integer, MetaData, String, Table, func, select

database = Path(tempfile.mkdtemp()) / "app.db"
shipments = Table(
    "shipments", MetaData(), Column("order_id", String(40)), Column("sku", String(20)),
    Column("qty", Integer),
)  # fmt: skip

# --8<-- [start:recipe]
import datetime as dt

import dramatiq
from sqlalchemy import create_engine, insert
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.dramatiq import InboxMiddleware

engine = create_engine(f"sqlite:///{database}")  # postgresql+psycopg://app@db/app
inbox = inboxguard.Inbox(
    engine,
    retention=inboxguard.RetentionPolicy(
        # the names the middleware reports at worker boot, so explain() shows one row each
        dead_letter_ttl=dt.timedelta(days=7),  # the broker's dead-letter TTL
        retry_schedule=dt.timedelta(days=47),  # Dramatiq's default Retries schedule, at worst
    ),
)

broker = StubBroker()  # yours: RedisBroker(url="redis://cache:6379/0") or RabbitmqBroker(...)
# 1. The middleware goes on the broker BEFORE any guarded actor is declared.
broker.add_middleware(InboxMiddleware(inbox, session_factory=sessionmaker(engine)))
dramatiq.set_broker(broker)


# 2. Name the business command ID; name the consumer explicitly.
@dramatiq.actor(inbox_command_id="order_id", inbox_consumer="shipping.ship")
def ship(order_id: str, sku: str, qty: int) -> dict[str, object]:
    # 3. Write through the guard's session: same transaction as the claim.
    session = inboxguard.current_session()
    session.execute(insert(shipments).values(order_id=order_id, sku=sku, qty=qty))
    return {"order_id": order_id, "shipped": qty}


# --8<-- [end:recipe]


inbox.create_schema()
shipments.metadata.create_all(engine)
broker.emit_after("process_boot")
worker = Worker(broker, worker_timeout=50, worker_threads=1)
worker.start()
try:
    for _ in range(2):  # the command sent twice: applied once
        ship.send("o-1", "BOOK-1", 2)
    broker.join(ship.queue_name)
    worker.join()
finally:
    worker.stop()
    broker.emit_before("process_stop")
with engine.connect() as conn:
    assert conn.scalar(select(func.count()).select_from(shipments)) == 1
# Every window the middleware reported has a declared twin of the same name.
rows = inbox.retention.explain()
reported = {row.window for row in rows if row.source.startswith("dramatiq")}
assert reported and reported <= {row.window for row in rows if row.source == "declared"}
