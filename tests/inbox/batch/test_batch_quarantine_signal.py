"""BT20: a refused batch entry says whether its quarantine record was written.

``entry.quarantine_recorded`` is true when the refusal is held by a record,
false when the record could not be written and was only logged (here: a
pool of one connection that the caller holds, so the record's own
transaction gets none). A consumer then sends that message back to the
broker instead of dead-lettering it with no record.
"""

from __future__ import annotations

import datetime as dt
import logging

import pytest
from sqlalchemy import create_engine

from inboxguard import BatchCommand, Inbox, PayloadMismatchError


def _box(db_url: str, prefix: str, **pool: int) -> Inbox:
    engine = create_engine(db_url, **pool)  # type: ignore[arg-type]
    inbox = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    with engine.begin() as conn:
        with inbox.guard(conn, consumer="c", command_id="m", payload={"n": 1}):
            pass
    return inbox


def _commands() -> list[object]:
    old = dt.datetime.now(dt.UTC) - dt.timedelta(days=30)
    return [("m", {"n": 2}), ("new", {}), BatchCommand("stale", {}, sent_at=old)]


def test_bt20_written_records_are_flagged(db_url: str, prefix: str) -> None:
    inbox = _box(db_url, prefix)
    try:
        with inbox.engine.begin() as conn:
            with inbox.guard_batch(conn, consumer="c", commands=_commands()) as batch:
                mismatch, new, stale = batch
        assert isinstance(mismatch.error, PayloadMismatchError)
        assert (mismatch.quarantine_recorded, stale.quarantine_recorded) == (True, True)
        assert new.fresh
        assert not new.quarantine_recorded
        assert sorted(r.command_id for r in inbox.quarantined()) == ["m", "stale"]
    finally:
        inbox.drop_schema()
        inbox.engine.dispose()


def test_bt20_a_record_that_could_not_be_written_is_flagged(
    db_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    inbox = _box(db_url, prefix, pool_size=1, max_overflow=0)
    try:
        with caplog.at_level(logging.ERROR, logger="inboxguard"):
            with inbox.engine.begin() as conn:  # the caller holds the only connection
                with inbox.guard_batch(conn, consumer="c", commands=_commands()) as batch:
                    mismatch, new, stale = batch
        assert (mismatch.refused, stale.refused, new.fresh) == (True, True, True)
        assert (mismatch.quarantine_recorded, stale.quarantine_recorded) == (False, False)
        assert inbox.quarantined() == []
        assert any("m" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
    finally:
        inbox.drop_schema()
        inbox.engine.dispose()
