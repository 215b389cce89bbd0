"""Read the quarantine, then resolve a record after looking into it."""

import tempfile
from datetime import timedelta
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import inboxguard

engine = create_engine(f"sqlite:///{Path(tempfile.mkdtemp()) / 'app.db'}")
inbox = inboxguard.Inbox(engine, retention=timedelta(days=7))
inbox.create_schema()
for amount in (10, 11):  # the second delivery changed the payload
    try:
        with Session(engine) as session, session.begin():
            with inbox.guard(session, consumer="billing", command_id="c-1", payload={"a": amount}):
                pass
    except inboxguard.PayloadMismatchError:
        pass

# --8<-- [start:list]
for record in inbox.quarantined():  # open records, oldest first
    print(
        record.reason,
        record.command_id,
        record.stored_digest,
        record.incoming_digest,
        record.occurrences,
        record.details,
    )
inbox.resolve_quarantine(record.id)  # after investigating
# --8<-- [end:list]

assert record.reason == "payload_mismatch"
assert inbox.quarantined() == []
assert inbox.quarantine_record(record.id).status == "resolved"
