"""G3: the same command ID with a different digest fails closed."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import Inbox, PayloadMismatchError
from tests.helpers import apply, count, create_business


def test_g03_mismatch_fails_closed_and_quarantines(
    inbox: Inbox, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """The block never runs, nothing commits, a quarantine record survives the
    rollback, repeats count occurrences, and a WARNING names both digests."""
    accounts, ledger = create_business(engine, inbox.table_prefix)
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="m", payload={"amount": 1}) as e:
            apply(session.connection(), accounts, ledger, "m", 1)
            e.result = "first"
    stored = e.digest
    ran = []
    for attempt in range(2):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="inboxguard"):
            with pytest.raises(PayloadMismatchError) as caught:
                with Session(engine) as session, session.begin():
                    with inbox.guard(
                        session,
                        consumer="c",
                        command_id="m",
                        payload={"amount": 999},
                        details={"attempt": attempt},
                    ):
                        ran.append(attempt)
                        apply(session.connection(), accounts, ledger, "m", 999)
        err = caught.value
        assert (err.consumer, err.command_id, err.stored_digest) == ("c", "m", stored)
        assert err.incoming_digest != stored
        assert not err.retryable
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1
        assert stored in warnings[0].getMessage()
        assert err.incoming_digest in warnings[0].getMessage()
        assert warnings[0].command_id == "m"  # type: ignore[attr-defined]
    assert ran == []
    assert count(engine, ledger) == 1
    (record,) = inbox.quarantined()
    assert record.reason == "payload_mismatch"
    assert record.occurrences == 2
    assert record.status == "open"
    assert (record.stored_digest, record.incoming_digest) == (stored, err.incoming_digest)
    assert record.details == {"attempt": 1}
    assert inbox.lookup("c", "m").result == "first"  # type: ignore[union-attr]


def test_g03_resolving_a_record_and_a_repeat_reopens_it(inbox: Inbox, engine: Engine) -> None:
    """An operator can resolve a record; the same mismatch again reopens it."""
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="x", payload=1):
            pass
    for _ in range(2):
        with pytest.raises(PayloadMismatchError), Session(engine) as session, session.begin():
            with inbox.guard(session, consumer="c", command_id="x", payload=2):
                pass
        (record,) = inbox.quarantined()
        assert inbox.resolve_quarantine(record.id)
        assert inbox.quarantined() == []
    (record,) = inbox.quarantined(status=None)
    assert record.occurrences == 2
