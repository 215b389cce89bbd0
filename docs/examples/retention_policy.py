"""Declare the replay windows; a window reported longer than the horizon stops the worker."""

import tempfile
from pathlib import Path

from sqlalchemy import create_engine

import inboxguard

engine = create_engine(f"sqlite:///{Path(tempfile.mkdtemp()) / 'app.db'}")

# --8<-- [start:declare]
from datetime import timedelta

from inboxguard import Inbox, RetentionPolicy

policy = RetentionPolicy(
    visibility_timeout=timedelta(hours=1),
    dead_letter_replay=timedelta(days=30),
    dispute=timedelta(days=60),
    margin=timedelta(days=2),  # default: 1 day
    result_ttl=timedelta(days=7),  # optional, see "Tiered evidence"
)
inbox = Inbox(engine, retention=policy)
# --8<-- [end:declare]

assert policy.horizon == timedelta(days=62)
assert policy.max_message_age == timedelta(days=60)

# --8<-- [start:align]
inbox.require_alignment(
    "celery: broker_transport_options.visibility_timeout", visibility_timeout=timedelta(hours=1)
)
# --8<-- [end:align]

# A window longer than the horizon fails closed, naming the window and its source.
try:
    inbox.require_alignment("dramatiq: dead_message_ttl", dead_message_ttl=timedelta(days=90))
except inboxguard.RetentionMisalignedError as exc:
    assert "dead_message_ttl" in str(exc)
else:
    raise AssertionError("a 90-day window must not fit a 62-day horizon")
print(policy.explain())
