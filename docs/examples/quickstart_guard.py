"""Quick start: a guarded handler applies a command once, however often it comes."""

from datetime import timedelta

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, func, select
from sqlalchemy.orm import Session

import inboxguard

engine = create_engine("sqlite:///billing.db")  # or postgresql+psycopg://app@db/app
charges = Table("charges", MetaData(), Column("invoice", String(40)), Column("cents", Integer))
charges.metadata.create_all(engine)

inbox = inboxguard.Inbox(
    engine,
    retention=inboxguard.RetentionPolicy(
        redelivery=timedelta(hours=1), dead_letter_replay=timedelta(days=30)
    ),
)
inbox.create_schema()  # or add the shipped Alembic revisions to your history


def on_message(body: dict) -> dict:
    with Session(engine) as session, session.begin():
        with inbox.guard(
            session,
            consumer="billing.charge-invoice",
            command_id=body["command_id"],
            payload=body,
        ) as entry:
            if entry.duplicate:
                return entry.result  # already applied: ack and move on
            session.execute(charges.insert().values(invoice=body["invoice"], cents=body["cents"]))
            entry.result = {"charged": body["cents"]}  # stored with the changes
            return entry.result


# Derive the command ID from the business intent, never from the delivery.
command_id = inboxguard.command_id_for("invoice.charge", invoice_id=42, cycle="2026-11")
message = {"command_id": command_id, "invoice": "42", "cents": 1500}

assert on_message(message) == {"charged": 1500}
assert on_message(message) == {"charged": 1500}  # a redelivery: skipped, same result
with Session(engine) as session:
    assert session.scalar(select(func.count()).select_from(charges)) == 1
