"""Purge expired evidence in batches; nothing inside the horizon is touched."""

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import inboxguard

now = datetime(2026, 1, 1, tzinfo=UTC)
engine = create_engine(f"sqlite:///{Path(tempfile.mkdtemp()) / 'app.db'}")
inbox = inboxguard.Inbox(engine, retention=timedelta(days=7), clock=lambda: now)
inbox.create_schema()
for n in range(3):
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="billing", command_id=f"c{n}", payload={"n": n}):
            pass

now += timedelta(days=8)  # past the horizon (the inbox clock moves with it)
with Session(engine) as session, session.begin():
    with inbox.guard(session, consumer="billing", command_id="new", payload={}):
        pass

# --8<-- [start:purge]
report = inbox.purge()  # now = the inbox clock, batches of 1000
print(report.summary())
# --8<-- [end:purge]
assert report.deleted == 3
assert inbox.lookup("billing", "new") is not None
