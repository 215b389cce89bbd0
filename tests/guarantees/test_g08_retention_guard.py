"""G8: a message older than the evidence horizon is refused, never processed as new."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import BeyondRetentionError, Inbox, RetentionPolicy
from tests.conftest import FakeClock


def test_g08_stale_message_is_refused_and_quarantined(
    engine: Engine, prefix: str, clock: FakeClock
) -> None:
    """sent_at older than the longest window is refused and quarantined."""
    policy = RetentionPolicy(dead_letter_replay=dt.timedelta(days=30), margin=dt.timedelta(days=1))
    box = Inbox(engine, retention=policy, table_prefix=prefix, clock=clock)
    box.create_schema()
    old = clock.now - dt.timedelta(days=31)
    ran = []
    with pytest.raises(BeyondRetentionError) as caught, Session(engine) as session:
        with box.guard(session, consumer="c", command_id="old", payload={}, sent_at=old):
            ran.append(1)
    assert ran == []
    assert caught.value.sent_at == old
    (record,) = box.quarantined()
    assert record.reason == "beyond_retention"
    assert box.lookup("c", "old") is None
    recent = clock.now - dt.timedelta(days=29)
    with Session(engine) as session, session.begin():
        with box.guard(session, consumer="c", command_id="new", payload={}, sent_at=recent) as e:
            assert not e.duplicate
    assert box.lookup("c", "new").expires_at == clock.now + dt.timedelta(days=31)  # type: ignore[union-attr]
