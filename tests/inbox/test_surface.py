"""The Inbox's public surface: the methods the command line goes through, and
nothing of its internals."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy.orm import Session

import inboxguard
from inboxguard import ConfigurationError, PayloadMismatchError
from tests.inbox.retention.helpers import DAY, seed

INTERNALS = (
    "assess",
    "prepare",
    "verdict",
    "judge",
    "dialect",
    "quarantine",
    "quarantine_values",
    "result_params",
)


def _mismatch(inbox: inboxguard.Inbox, command_id: str) -> None:
    for payload in (1, 2):
        try:
            with Session(inbox.engine) as s, s.begin():
                with inbox.guard(s, consumer="orders", command_id=command_id, payload=payload):
                    pass
        except PayloadMismatchError:
            pass


def test_the_internals_are_not_part_of_the_inbox(inbox: inboxguard.Inbox) -> None:
    """None of the guard's internals is an attribute of Inbox or of an inbox."""
    for name in INTERNALS:
        assert not hasattr(inboxguard.Inbox, name), name
        assert not hasattr(inbox, name), name


def test_quarantine_record_and_limit(inbox: inboxguard.Inbox) -> None:
    """quarantine_record finds a record whatever its status; quarantined honours limit."""
    _mismatch(inbox, "c1")
    _mismatch(inbox, "c2")
    first, second = inbox.quarantined("orders")
    assert inbox.quarantined("orders", limit=1) == [first]
    assert inbox.resolve_quarantine(first.id)
    found = inbox.quarantine_record(first.id)
    assert found is not None
    assert (found.command_id, found.status) == ("c1", "resolved")
    assert inbox.quarantined("orders") == [second]
    assert inbox.quarantine_record(second.id + 1000) is None


def test_purge_plan_counts_what_purge_does(inbox: inboxguard.Inbox) -> None:
    """The plan counts the expired rows and due resolved records that purge
    then deletes; resolved_before=None keeps every resolved record."""
    now = inbox.clock()
    seed(inbox, ["old-1", "old-2"], processed_at=now - 40 * DAY)
    seed(inbox, ["new"], processed_at=now)
    _mismatch(inbox, "c1")
    [record] = inbox.quarantined("orders")
    inbox.resolve_quarantine(record.id)
    later = now + DAY
    keep = inbox.purge_plan(now=later, resolved_before=None)
    assert (keep.expired, keep.quarantine_due) == (2, 0)
    plan = inbox.purge_plan(now=later, resolved_before=later)
    assert (plan.expired, plan.quarantine_due) == (2, 1)
    report = inbox.purge(now=later, resolved_before=later)
    assert (report.deleted, report.quarantine_deleted) == (2, 1)
    assert inbox.quarantine_record(record.id) is None
    assert inbox.lookup("seed", "new") is not None


def test_purge_keeps_resolved_records_younger_than_the_horizon(inbox: inboxguard.Inbox) -> None:
    """By default a resolved record goes only once last seen before now minus the horizon."""
    _mismatch(inbox, "c1")
    [record] = inbox.quarantined("orders")
    inbox.resolve_quarantine(record.id)
    soon = inbox.clock() + dt.timedelta(days=29)
    assert inbox.purge_plan(now=soon).quarantine_due == 0
    assert inbox.purge(now=soon).quarantine_deleted == 0
    late = inbox.clock() + dt.timedelta(days=31)
    assert inbox.purge(now=late).quarantine_deleted == 1


def test_advance_watermark_names_itself_when_given_a_wrong_object(
    inbox: inboxguard.Inbox,
) -> None:
    """The session check is the shared one, with this method's name in the refusal."""
    with pytest.raises(ConfigurationError, match=r"advance_watermark\(\) needs"):
        inbox.advance_watermark(object(), consumer="c", key="k", position=1)  # type: ignore[arg-type]
