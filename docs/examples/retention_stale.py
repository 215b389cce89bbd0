"""A message older than the evidence is refused and quarantined, never judged."""

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import inboxguard

engine = create_engine(f"sqlite:///{Path(tempfile.mkdtemp()) / 'app.db'}")
inbox = inboxguard.Inbox(
    engine, retention=inboxguard.RetentionPolicy(redelivery=timedelta(days=30))
)
inbox.create_schema()


def handle(cmd_id: str, payload: dict, message_sent_at: datetime) -> None:
    with Session(engine) as session, session.begin():
        # --8<-- [start:guard]
        with inbox.guard(
            session, consumer="billing", command_id=cmd_id, payload=payload, sent_at=message_sent_at
        ) as entry:
            ...
        # --8<-- [end:guard]
        assert not entry.duplicate


handle("fresh", {"n": 1}, datetime.now(UTC) - timedelta(hours=1))
try:
    handle("stale", {"n": 2}, datetime.now(UTC) - timedelta(days=45))
except inboxguard.BeyondRetentionError:
    pass
else:
    raise AssertionError("a message older than max_message_age must be refused")
[record] = inbox.quarantined()
assert (record.command_id, record.reason) == ("stale", "beyond_retention")
assert inbox.lookup("billing", "stale") is None  # no evidence written
