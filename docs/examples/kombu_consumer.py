"""A kombu consumer guarded by the inbox, on kombu's in-memory transport.

Set BROKER_URL=amqp://guest:guest@localhost// to run it against RabbitMQ.
"""

import os
import tempfile
from pathlib import Path

from kombu import Exchange
from sqlalchemy import Column, Integer, MetaData, String, Table, func, select

BROKER_URL = os.environ.get("BROKER_URL", "memory://")
database = Path(tempfile.mkdtemp()) / "app.db"
charges = Table("charges", MetaData(), Column("id", String(40)), Column("cents", Integer))

# --8<-- [start:worker]
from datetime import timedelta

from kombu import Connection, Queue
from kombu.mixins import ConsumerProducerMixin
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.kombu import guarded

engine = create_engine(f"sqlite:///{database}")  # postgresql+psycopg://app@db/app
inbox = inboxguard.Inbox(engine, retention=timedelta(days=7))


def charge(body: dict, message) -> dict:
    session = inboxguard.current_session()  # the transaction the inbox row is in
    session.execute(charges.insert().values(id=body["command_id"], cents=body["amount"]))
    return {"charged": body["amount"]}  # stored as the command's result (JSON)


class Worker(ConsumerProducerMixin):
    def __init__(self, connection):
        self.connection = connection
        self.on_message = guarded(
            charge,
            inbox,
            session_factory=sessionmaker(engine),
            command_id="command_id",  # omit to read the outbox's x-inbox-command-id header
            consumer="billing.charge",
            max_attempts=5,  # deliveries before giving up
            retry_delay=timedelta(seconds=1),  # spacing of retried deliveries
            producer=lambda: self.producer,  # publish retry copies on a separate connection
        )

    def get_consumers(self, Consumer, channel):
        return [
            Consumer(
                [Queue("charges", durable=True)],
                callbacks=[self.on_message],
                on_decode_error=self.on_message.on_decode_error,  # quarantine, never ack
                accept=["json"],
                prefetch_count=10,
            )
        ]


# --8<-- [end:worker]

inbox.create_schema()
charges.metadata.create_all(engine)


class CountingWorker(Worker):
    """Stops once both copies are settled (the callback acks before it returns)."""

    def __init__(self, connection):
        super().__init__(connection)
        guarded_callback, self.settled = self.on_message, 0

        def counted(body, message):
            guarded_callback(body, message)
            self.settled += 1
            self.should_stop = self.settled >= 2

        counted.on_decode_error = guarded_callback.on_decode_error
        self.on_message = counted


with Connection(BROKER_URL) as connection:
    with connection.Producer() as producer:
        for _ in range(2):  # the same command, delivered twice
            producer.publish(
                {"command_id": "charge-1", "amount": 1500},
                exchange=Exchange(""),
                routing_key="charges",
                declare=[Queue("charges", durable=True)],
            )
    CountingWorker(connection).run()  # a worker: Worker(Connection(url)).run()
with engine.connect() as conn:
    assert conn.scalar(select(func.count()).select_from(charges)) == 1
