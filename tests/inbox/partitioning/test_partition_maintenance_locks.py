"""PT15: partition maintenance never stalls claims behind a long transaction.

Creating a partition needs ``ACCESS EXCLUSIVE`` on the ``DEFAULT`` partition
and dropping one needs it on the parent; while such a request waits (here
behind a transaction left open after reading the inbox), every claim that
arrives queues behind it. The purge asks for each lock under a short
``lock_timeout`` and stops at the first one it cannot have: one attempt to
create and one to drop, however many partitions are due, then the next
purge does the work once the transaction is gone.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Engine

import inboxguard
from tests.conftest import FakeClock
from tests.inbox.partitioning.conftest import claim, partitions

pytestmark = pytest.mark.postgresql

DAY = dt.timedelta(days=1)


def test_pt15_a_purge_behind_an_open_transaction_tries_each_lock_once(
    pg_engine: Engine,
    pbox: inboxguard.Inbox,
    day_clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    name = pbox.tables.inbox.name
    assert claim(pg_engine, pbox, "old")
    day_clock.advance(6 * DAY)  # several partitions expired, several more due
    before = partitions(pg_engine, pbox)
    ddl: list[str] = []

    def log(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.startswith(("LOCK TABLE", "ALTER TABLE")):
            ddl.append(statement.split(" IN ", maxsplit=1)[0].split(" ATTACH ", maxsplit=1)[0])

    blocker = pg_engine.connect()
    try:
        blocker.execute(text(f'SELECT count(*) FROM "{name}"'))  # holds its locks, open
        event.listen(pg_engine, "before_cursor_execute", log)
        try:
            with caplog.at_level(logging.WARNING, logger="inboxguard"):
                report = pbox.purge()
        finally:
            event.remove(pg_engine, "before_cursor_execute", log)
        assert (report.partitions_created, report.partitions_dropped) == ((), ())
        locks = [s for s in ddl if s.startswith("LOCK TABLE")]
        detaches = [s for s in ddl if "DETACH PARTITION" in s]
        assert (len(locks), len(detaches)) == (1, 1), ddl
        deferred = [r.getMessage() for r in caplog.records if "deferred" in r.getMessage()]
        assert len(deferred) == 2
        assert partitions(pg_engine, pbox) == before
        assert claim(pg_engine, pbox, "meanwhile")  # claims go on
    finally:
        blocker.close()
    report = pbox.purge()  # the transaction is gone: the work is done now
    assert report.partitions_created
    assert f"{name}_p20260103" in report.partitions_dropped
    assert claim(pg_engine, pbox, "after")
