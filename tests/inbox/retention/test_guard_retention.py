"""Stale replays are refused, and duplicates outlive their results."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select

import inboxguard
from tests.inbox.retention.helpers import DAY


def claim(inbox: inboxguard.Inbox, command_id: str, *, sent_at: dt.datetime | None = None) -> dict:
    """Run a handler under the guard; return what it decided."""
    ran = []
    with (
        inbox.engine.begin() as conn,
        inbox.guard(
            conn, consumer="billing", command_id=command_id, payload={"n": 1}, sent_at=sent_at
        ) as entry,
    ):
        if not entry.duplicate:
            ran.append(command_id)
            entry.result = {"charged": command_id}
    return {
        "ran": bool(ran),
        "duplicate": entry.duplicate,
        "result": entry.result,
        "expired": entry.result_expired,
    }


def test_replay_older_than_horizon_is_refused_and_quarantined(box: inboxguard.Inbox, clock) -> None:
    sent_at = clock.now - 10 * DAY - dt.timedelta(seconds=1)
    with pytest.raises(inboxguard.BeyondRetentionError) as caught:
        claim(box, "inv-1", sent_at=sent_at)
    assert isinstance(caught.value, inboxguard.CommandRejectedError)
    assert box.lookup("billing", "inv-1") is None  # never processed as new
    [record] = box.quarantined("billing")
    assert (record.command_id, record.reason) == ("inv-1", "beyond_retention")


def test_replay_inside_horizon_is_processed(box: inboxguard.Inbox, clock) -> None:
    assert claim(box, "inv-2", sent_at=clock.now - 10 * DAY + dt.timedelta(seconds=1))["ran"]
    assert box.quarantined("billing") == []


def test_duplicate_after_result_ttl_is_still_skipped(box: inboxguard.Inbox, clock) -> None:
    first = claim(box, "inv-3")
    assert first["ran"]
    clock.advance(DAY)
    early = claim(box, "inv-3")
    assert early == {
        "ran": False,
        "duplicate": True,
        "result": {"charged": "inv-3"},
        "expired": False,
    }
    clock.advance(DAY)  # exactly result_ttl: the result is gone even before a purge ran
    assert claim(box, "inv-3") == {"ran": False, "duplicate": True, "result": None, "expired": True}
    report = box.purge()
    assert (report.deleted, report.results_dropped) == (0, 1)
    c = box.tables.inbox.c
    with box.engine.connect() as conn:
        row = conn.execute(select(c.result, c.digest, c.expires_at)).one()
    assert row.result is None  # compacted ...
    assert row.digest.startswith("sha256:")  # ... but the evidence stays
    clock.advance(7 * DAY)  # still inside the 10-day horizon
    assert claim(box, "inv-3") == {"ran": False, "duplicate": True, "result": None, "expired": True}
