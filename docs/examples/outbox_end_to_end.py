"""Producer, dispatcher and consumer of one outbox, wired by nothing but a queue name.

Runs in one process on two SQLite files and kombu's in-memory broker; set
BROKER_URL=amqp://guest:guest@localhost// to go through RabbitMQ instead.
In production each part is its own process.
"""

import os
import tempfile
from datetime import timedelta
from pathlib import Path

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, func, select
from sqlalchemy.orm import Session, sessionmaker

import inboxguard

BROKER_URL = os.environ.get("BROKER_URL", "memory://")
here = Path(tempfile.mkdtemp())
engine = create_engine(f"sqlite:///{here / 'shop.db'}")  # the producer's database
consumer_engine = create_engine(f"sqlite:///{here / 'shipping.db'}")  # the consumer's
orders = Table(
    "orders", MetaData(), Column("id", Integer, primary_key=True), Column("sku", String(20))
)
shipments = Table("shipments", MetaData(), Column("order_id", Integer, primary_key=True))
orders.metadata.create_all(engine)
shipments.metadata.create_all(consumer_engine)
inbox = inboxguard.Inbox(consumer_engine, retention=timedelta(days=7))
inbox.create_schema()


def place_order(session: Session, cart: dict):
    order_id = session.execute(orders.insert().values(sku=cart["sku"])).inserted_primary_key[0]
    return session.execute(select(orders).where(orders.c.id == order_id)).one()


cart = {"sku": "BOOK-1"}

# --8<-- [start:produce]
from sqlalchemy.orm import Session

import inboxguard

outbox = inboxguard.Outbox(engine)  # same engine as the business data
outbox.create_schema()

with Session(engine) as session, session.begin():
    order = place_order(session, cart)
    outbox.add(
        session,
        command_id=inboxguard.command_id_for("order.ship", order_id=order.id),
        destination="shop.ship-order",  # queue, task or actor name
        payload={"order_id": order.id},
        headers={"tenant": "eu-1"},  # optional, JSON values
    )
# --8<-- [end:produce]

# --8<-- [start:dispatch]
from kombu import Connection, Queue

from inboxguard.adapters.kombu.transport import KombuTransport

transport = KombuTransport(
    Connection(BROKER_URL, transport_options={"confirm_publish": True}),  # amqp://... in production
    declare=[Queue("shop.ship-order", durable=True)],  # the queues rows are sent to
)
dispatcher = inboxguard.Dispatcher(outbox, transport, batch_size=100)
dispatcher.run_once()  # one pass; a dispatcher process runs dispatcher.run_forever()
# --8<-- [end:dispatch]

assert outbox.status().backlog == 0

# --8<-- [start:consume]
from kombu.mixins import ConsumerMixin

from inboxguard.adapters.kombu import guarded


def ship(body: dict, message) -> dict:
    inboxguard.current_session().execute(shipments.insert().values(order_id=body["order_id"]))
    return {"shipped": body["order_id"]}


class Shipper(ConsumerMixin):
    def __init__(self, connection):
        self.connection = connection
        self.on_message = guarded(
            ship,
            inbox,
            session_factory=sessionmaker(consumer_engine),
            consumer="shop.shipping",  # no command_id=: the outbox's header
            require_sent_at=True,  # the outbox stamps every message it relays
        )

    def get_consumers(self, Consumer, channel):
        queue = Queue("shop.ship-order", durable=True)
        return [Consumer([queue], callbacks=[self.on_message], accept=["json"])]


# --8<-- [end:consume]


class OneMessageShipper(Shipper):
    """Stops after one message, so the script ends."""

    def on_iteration(self):
        with consumer_engine.connect() as conn:
            self.should_stop = conn.scalar(select(func.count()).select_from(shipments)) > 0


with Connection(BROKER_URL) as connection:
    OneMessageShipper(connection).run()

order_command = inboxguard.command_id_for("order.ship", order_id=order.id)
assert inbox.lookup("shop.shipping", order_command) is not None
with consumer_engine.connect() as conn:
    assert conn.scalar(select(func.count()).select_from(shipments)) == 1
