"""A whole Celery deployment on RabbitMQ: worker, dead-letter queue, outbox, operator.

# needs: rabbitmq
Run it with `python celery_rabbitmq_complete.py` (RabbitMQ on localhost, or
INBOXGUARD_AMQP_URL): it starts a real `celery worker` on this module, ships
one order through the outbox, redelivers it, sends a changed copy, and
resolves the quarantined copy as an operator would. SQLite file: shop.db.
"""

import json
import os
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

from celery import Celery
from kombu import Exchange, Queue
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, func, select
from sqlalchemy.orm import Session, sessionmaker

import inboxguard
from inboxguard.adapters.celery import inbox_task
from inboxguard.adapters.celery.transport import CeleryTransport

BROKER = os.environ.get("INBOXGUARD_AMQP_URL", "amqp://guest:guest@localhost//")
DB = f"sqlite:///{Path('shop.db').resolve()}"
QUEUE = os.environ.setdefault("SHOP_QUEUE", f"shop-{uuid.uuid4().hex[:8]}")  # one per run

# The worker's queue dead-letters into QUEUE.dead; declare both, or RabbitMQ drops refusals.
work_queue = Queue(
    QUEUE,
    Exchange(QUEUE),
    routing_key=QUEUE,
    queue_arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": f"{QUEUE}.dead"},
)
dead_letters = Queue(f"{QUEUE}.dead", routing_key=f"{QUEUE}.dead")
app = Celery("shop", broker=BROKER)
app.conf.update(
    task_queues=[work_queue],
    task_default_queue=QUEUE,
    broker_transport_options={"confirm_publish": True},
)

engine = create_engine(DB, connect_args={"timeout": 30})
inbox = inboxguard.Inbox(engine, retention=timedelta(days=8))  # > the DLQ replay window
outbox = inboxguard.Outbox(engine)
shipments = Table(
    "shipments",
    MetaData(),
    Column("order_id", String(40), primary_key=True),
    Column("parcels", Integer, nullable=False),
)


@inbox_task(
    inbox,
    session_factory=sessionmaker(engine),
    command_id="order_id",
    consumer="shop.ship",
    name="shop.ship",
    max_retries=3,
    inbox_replay_windows={"dead_letter_replay": timedelta(days=7)},
)
def ship(order_id: str, parcels: int) -> dict:
    """The guarded task: runs once per order, in the transaction that records it."""
    inboxguard.current_session().execute(
        shipments.insert().values(order_id=order_id, parcels=parcels)
    )
    return {"shipped": order_id}


def wait(what, check, seconds=60):
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return found


def shipped() -> int:
    with engine.connect() as conn:
        return conn.scalar(select(func.count()).select_from(shipments))


def cli(*args):
    """The operator's commands, as typed in a shell."""
    out = subprocess.run(
        [sys.executable, "-m", "inboxguard", *args, "--db", DB],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def main() -> None:
    inbox.create_schema()
    outbox.create_schema()
    shipments.metadata.create_all(engine)
    with app.connection_for_write() as conn:  # the dead-letter queue, before any refusal
        dead_letters.bind(conn.default_channel).declare()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    log = open("worker.log", "w")  # noqa: SIM115 - the worker writes it while we run
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            Path(__file__).stem,
            "worker",
            "-P",
            "solo",
            "-Q",
            QUEUE,
            "--without-gossip",
            "--without-mingle",
            # (event heartbeats stay on: every 2 s they wake the worker's
            # loop, which otherwise sleeps up to 10 s before it acts on a
            # SIGTERM or sends a rejected message on to the dead letters)
            "-l",
            "INFO",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait("the worker", lambda: " ready." in Path("worker.log").read_text())
        # The producer: the order and its command commit together, in one transaction.
        with Session(engine) as session, session.begin():
            outbox.add(
                session,
                command_id="order-1",
                destination="shop.ship",
                payload={"order_id": "order-1", "parcels": 2},
            )
        with inboxguard.Dispatcher(outbox, CeleryTransport(app, queue=QUEUE)) as dispatcher:
            assert dispatcher.run_once() == 1  # published, confirmed by RabbitMQ
        wait("the shipment", shipped)
        ship.apply_async(kwargs={"order_id": "order-1", "parcels": 2})  # a redelivery
        ship.apply_async(kwargs={"order_id": "order-1", "parcels": 3})  # changed: a bug upstream
        [record] = wait("the quarantine", lambda: inbox.quarantined("shop.ship"))
        assert (record.reason, shipped()) == ("payload_mismatch", 1)  # the duplicate was skipped
        with app.connection_for_write() as conn:
            kept = wait("the dead letter", lambda: dead_letters.bind(conn.default_channel).get())
            kept.ack()
        assert kept.payload[1] == {"order_id": "order-1", "parcels": 3}
        # The operator: why was it refused, what was kept, then close it with a reason.
        why = json.loads(cli("explain", "shop.ship", "order-1", "--json"))
        assert why["evidence"]["stored_digest"] == record.stored_digest
        assert '"parcels": 3' in cli("quarantine", "show", str(record.id))
        cli("quarantine", "resolve", str(record.id), "--reason", "parcels fixed upstream")
        assert not inbox.quarantined("shop.ship")  # resolved: no open record left
    finally:
        worker.terminate()
        worker.wait(30)
        log.close()
        with app.connection_for_write() as conn:
            for queue in (work_queue, dead_letters):
                queue.bind(conn.default_channel).delete()
    print("shipped once, duplicate skipped, mismatch quarantined, dead-lettered and resolved")


if __name__ == "__main__":
    main()
