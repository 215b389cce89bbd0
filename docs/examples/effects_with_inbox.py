"""The inbox for the local commit, the ledger for the charge: a rollback after
the charge does not charge again."""

import sys
import tempfile
from datetime import timedelta
from pathlib import Path

from sqlalchemy import Column, MetaData, String, Table, create_engine, select
from sqlalchemy.orm import Session

sys.path.insert(0, str(Path(__file__).parent))  # the stand-in gateway next to this file
from effects_gateway import Gateway

import inboxguard

engine = create_engine(f"sqlite:///{Path(tempfile.mkdtemp()) / 'app.db'}")
invoices = Table("invoices", MetaData(), Column("id", String(20)), Column("charge", String(40)))
invoices.metadata.create_all(engine)
inbox = inboxguard.Inbox(engine, retention=timedelta(days=7))
inbox.create_schema()
# On SQLite the ledger needs a database of its own (one writer at a time);
# on PostgreSQL or MariaDB it can share the engine.
ledger = inboxguard.EffectLedger(create_engine(f"sqlite:///{Path(tempfile.mkdtemp()) / 'l.db'}"))
ledger.create_schema()
gateway = Gateway()
crash = [False, True]  # popped from the end: the first run dies


def mark_paid(session: Session, invoice_id: str, charge: str) -> None:
    session.execute(invoices.insert().values(id=invoice_id, charge=charge))
    if crash.pop():
        raise RuntimeError("worker died after the charge, before the commit")


# --8<-- [start:handle]
def handle(message):
    with Session(engine) as session, session.begin():
        with inbox.guard(
            session,
            consumer="billing.charge-invoice",
            command_id=message["command_id"],
            payload=message,
        ) as entry:
            if entry.duplicate:
                return
            receipt = ledger.execute(
                f"invoice-{message['invoice_id']}/charge",
                gateway,
                {"amount": message["amount"], "currency": "EUR"},
            )
            mark_paid(session, message["invoice_id"], receipt.reference)
            entry.result = {"charge": receipt.reference}


# --8<-- [end:handle]

message = {"command_id": "charge-invoice-9", "invoice_id": "9", "amount": 1500}
try:
    handle(message)  # charges, then the local transaction rolls back
except RuntimeError:
    pass
handle(message)  # the redelivery: the ledger returns the same receipt
handle(message)  # a duplicate: skipped by the inbox
assert (gateway.requests, gateway.charges) == (1, 1)
with Session(engine) as session:
    assert session.execute(select(invoices.c.charge)).scalars().all() == ["ch_1"]
