"""A domain watermark: one row per key instead of one per command."""

import tempfile
from datetime import timedelta
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import inboxguard

engine = create_engine(f"sqlite:///{Path(tempfile.mkdtemp()) / 'app.db'}")
inbox = inboxguard.Inbox(engine, retention=timedelta(days=30))
inbox.create_schema()
billed = []


def bill_customer(session: Session, customer_id: int, cycle: str) -> None:
    billed.append((customer_id, cycle))  # your changes, through `session`


def on_billing_run(customer_id: int) -> None:
    # --8<-- [start:advance]
    with Session(engine) as session, session.begin():
        if inbox.advance_watermark(
            session, consumer="billing", key=f"customer:{customer_id}", position=202611
        ):
            bill_customer(session, customer_id, cycle="2026-11")
        # else: November (or a later cycle) was already billed for this customer
    # --8<-- [end:advance]


on_billing_run(42)
on_billing_run(42)  # the run is replayed
assert billed == [(42, "2026-11")]
