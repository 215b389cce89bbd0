"""A guarded Celery task, run in-process with apply() (no broker, no worker)."""

import tempfile
from pathlib import Path

from celery import Celery, signals
from sqlalchemy import Column, Integer, MetaData, String, Table, func, select

app = Celery("billing", broker="memory://")  # yours: redis://... or amqp://...
database = Path(tempfile.mkdtemp()) / "app.db"
transfers = Table(
    "transfers", MetaData(), Column("transfer_id", String(40)), Column("amount", Integer)
)

# --8<-- [start:recipe]
from datetime import timedelta

from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.celery import inbox_task

engine = create_engine(f"sqlite:///{database}")  # postgresql+psycopg://app@db/app
Session = sessionmaker(engine)
inbox = inboxguard.Inbox(
    engine,
    retention=inboxguard.RetentionPolicy(dead_letter_replay=timedelta(days=14)),
)


@inbox_task(
    inbox,
    session_factory=Session,
    command_id="transfer_id",  # or a callable over the task's arguments
    consumer="billing.transfers",  # set it: see "Why set consumer" below
    max_retries=10,
    retry_backoff_max=60,
)
def apply_transfer(transfer_id: str, account: str, amount: int) -> dict:
    session = inboxguard.current_session()  # the inbox's transaction
    session.execute(transfers.insert().values(transfer_id=transfer_id, amount=amount))
    return {"transfer_id": transfer_id}  # stored; a duplicate returns it


# --8<-- [end:recipe]


# --8<-- [start:base]
from inboxguard.adapters.celery import InboxTask


@app.task(
    base=InboxTask,
    inbox=inbox,
    inbox_session_factory=Session,
    inbox_command_id="transfer_id",
    inbox_consumer="billing.refunds",
)
def refund_transfer(transfer_id: str, account: str, amount: int) -> dict:
    inboxguard.current_session().execute(
        transfers.insert().values(transfer_id=transfer_id, amount=-amount)
    )
    return {"refunded": transfer_id}


# --8<-- [end:base]


# --8<-- [start:prefork]
@signals.worker_process_init.connect
def _fresh_pool(**_):
    engine.dispose(close=False)


# --8<-- [end:prefork]


inbox.create_schema()
transfers.metadata.create_all(engine)
# The same command published twice, with a new task ID each time: applied once.
first = apply_transfer.apply(args=("t-1", "acc-9", 500))
again = apply_transfer.apply(args=("t-1", "acc-9", 500))
assert first.get() == again.get() == {"transfer_id": "t-1"}
assert refund_transfer.apply(args=("t-1", "acc-9", 500)).get() == {"refunded": "t-1"}
with engine.connect() as conn:
    assert conn.scalar(select(func.count()).select_from(transfers)) == 2
