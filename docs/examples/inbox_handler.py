"""The handler decorator: the call's arguments are the payload."""

import tempfile
from datetime import timedelta
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import inboxguard

engine = create_engine(f"sqlite:///{Path(tempfile.mkdtemp()) / 'app.db'}")
inbox = inboxguard.Inbox(engine, retention=timedelta(days=7))
inbox.create_schema()
runs = []


# --8<-- [start:handler]
@inbox.handler(consumer="orders.place", command_id="order_id")
def place(session, order_id: str, qty: int) -> dict:
    runs.append(order_id)  # your changes go through `session`
    return {"order": order_id}


with Session(engine) as session, session.begin():
    place(session, "o-1", qty=2)  # runs once; later calls return the stored dict
# --8<-- [end:handler]

with Session(engine) as session, session.begin():
    assert place(session, order_id="o-1", qty=2) == {"order": "o-1"}  # same digest
assert runs == ["o-1"]
