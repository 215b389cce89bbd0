"""``Inbox.handler(sent_at=)``: the decorator refuses a replay older than the
evidence horizon, as ``guard(sent_at=)`` does (the demo's handler relies on it)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

import inboxguard
from inboxguard import BeyondRetentionError, ConfigurationError
from inboxguard.testing import ManualClock


def test_a_stale_replay_is_quarantined_and_not_run(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    clock = ManualClock()
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), clock=clock)
    inbox.create_schema()
    runs: list[str] = []

    @inbox.handler(
        consumer="orders.place", command_id="order_id", sent_at="sent", exclude=("kwargs.sent",)
    )
    def place(session: Session, order_id: str, *, sent: dt.datetime | None) -> str:
        session.execute(text("SELECT 1"))
        runs.append(order_id)
        return order_id

    first = clock()
    with Session(engine) as session, session.begin():
        assert place(session, "o-1", sent=first) == "o-1"
    clock.advance(inbox.retention.horizon + dt.timedelta(hours=1))
    inbox.purge()
    with Session(engine) as session, session.begin(), pytest.raises(BeyondRetentionError):
        place(session, "o-1", sent=first)
    with Session(engine) as session, session.begin():  # a fresh message still runs
        assert place(session, "o-2", sent=clock()) == "o-2"
    assert runs == ["o-1", "o-2"]
    [record] = inbox.quarantine_records_of(consumer="orders.place", command_id="o-1")
    assert str(record.reason) == "beyond_retention"
    engine.dispose()


def test_sent_at_naming_no_argument_is_refused(tmp_path: Path) -> None:
    inbox = inboxguard.Inbox(
        create_engine(f"sqlite:///{tmp_path / 'app.db'}"), retention=dt.timedelta(days=1)
    )
    with pytest.raises(ConfigurationError, match=r"sent_at='sent' names no argument of .*order_id"):

        @inbox.handler(consumer="orders.place", command_id="order_id", sent_at="sent")
        def place(session: Session, order_id: str) -> str:
            return order_id
