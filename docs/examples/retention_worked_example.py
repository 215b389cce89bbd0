"""The worked example of retention.md, day by day, on a clock the script moves."""

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import inboxguard
from inboxguard import RetentionPolicy

# --8<-- [start:policy]
policy = RetentionPolicy(
    visibility_timeout=timedelta(hours=1),
    dead_letter_replay=timedelta(days=30),
    dispute=timedelta(days=60),
    margin=timedelta(days=2),
    result_ttl=timedelta(days=7),
)
# horizon = 60 d + 2 d = 62 d; max_message_age = 60 d
# --8<-- [end:policy]

day0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
now = day0
engine = create_engine(f"sqlite:///{Path(tempfile.mkdtemp()) / 'app.db'}")
inbox = inboxguard.Inbox(engine, retention=policy, clock=lambda: now)
inbox.create_schema()
command = {"command_id": "charge-7", "customer": 7, "cents": 1500}


def deliver(at: timedelta) -> inboxguard.InboxEntry:
    """Deliver the command (sent on day 0) at day0 + ``at``."""
    global now
    now = day0 + at
    with Session(engine) as session, session.begin():
        with inbox.guard(
            session, consumer="payments", command_id="charge-7", payload=command, sent_at=day0
        ) as entry:
            if not entry.duplicate:
                entry.result = {"charged": 1500}
        return entry


assert not deliver(timedelta(0)).duplicate  # day 0: processed
assert deliver(timedelta(hours=1)).result == {"charged": 1500}  # redelivered
assert deliver(timedelta(days=5)).result == {"charged": 1500}  # a retry
late = deliver(timedelta(days=29))  # a dead-letter replay, past the result TTL
assert late.duplicate and late.result is None and late.result_expired
assert deliver(timedelta(days=59)).duplicate  # the dispute flow: still skipped
try:
    deliver(timedelta(days=61))  # sent on day 0: older than max_message_age
except inboxguard.BeyondRetentionError:
    pass
else:
    raise AssertionError("day 61 must be refused")
now = day0 + timedelta(days=62, seconds=1)
assert inbox.purge().deleted == 1  # the row expired on day 62
