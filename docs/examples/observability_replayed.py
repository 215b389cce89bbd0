"""Telling a replayed result from a fresh one: ``inboxguard.current_entry()``."""

import datetime as dt

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import inboxguard

engine = create_engine("sqlite://")
inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=7), telemetry=False)
inbox.create_schema()


@inbox.handler(consumer="billing", command_id="invoice_id")
def charge(session: Session, invoice_id: str, amount: int) -> dict[str, int]:
    """Charge an invoice once; a replay returns the stored result."""
    return {"charged": amount}


for _ in range(2):
    with Session(engine) as session, session.begin():
        result = charge(session, "inv-7", 40)
    # The entry of the guard that just ran in this thread: was it a replay?
    replayed = inboxguard.current_entry().duplicate
    print(result, "replayed" if replayed else "fresh")
