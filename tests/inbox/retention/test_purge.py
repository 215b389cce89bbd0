"""Purge deletes exactly the expired evidence, in batches, and leaves the rest."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from sqlalchemy import create_engine, insert, select, update

import inboxguard
from inboxguard.sql.dialects import database_for
from tests.inbox.retention.helpers import DAY, count_rows, seed, stored_ids, wait_until

SECOND = dt.timedelta(seconds=1)


def test_purge_deletes_exactly_the_expired_rows(box: inboxguard.Inbox, clock) -> None:
    now = clock.now
    expired = [f"old-{i}" for i in range(23)]
    boundary = ["boundary"]  # expires_at == now: expired
    kept = [f"young-{i}" for i in range(17)]
    seed(box, expired, processed_at=now - 11 * DAY)
    seed(box, boundary, processed_at=now - 10 * DAY)
    seed(box, kept, processed_at=now - 10 * DAY + SECOND)
    with (
        box.engine.begin() as conn,
        box.guard(conn, consumer="live", command_id="fresh", payload={}) as entry,
    ):
        entry.result = 1

    report = box.purge(batch_size=5)

    assert report.acquired
    assert report.complete
    assert report.deleted == 24
    assert report.batches >= 5
    assert stored_ids(box, "seed") == set(kept)
    assert stored_ids(box, "live") == {"fresh"}
    assert report.oldest_remaining_expiry == now + SECOND
    assert box.purge().deleted == 0  # idempotent


def test_max_batches_stops_early_and_says_so(box: inboxguard.Inbox, clock) -> None:
    seed(box, [f"old-{i}" for i in range(30)], processed_at=clock.now - 20 * DAY)
    first = box.purge(batch_size=4, max_batches=3)
    assert (first.deleted, first.batches, first.complete) == (12, 3, False)
    assert count_rows(box) == 18
    rest = box.purge(batch_size=4)
    assert (rest.deleted, rest.complete) == (18, True)
    assert rest.oldest_remaining_expiry is None
    assert "deleted 18 expired rows" in rest.summary()


def test_purge_never_touches_open_quarantine_records(box: inboxguard.Inbox, clock) -> None:
    q = box.tables.quarantine
    old = clock.now - 30 * DAY
    rows = [
        {"command_id": "open-old", "status": "open", "last_seen_at": old},
        {"command_id": "resolved-old", "status": "resolved", "last_seen_at": old},
        {"command_id": "resolved-new", "status": "resolved", "last_seen_at": clock.now - DAY},
    ]
    common = {
        "consumer": "c",
        "reason": "payload_mismatch",
        "incoming_digest": "sha256:" + "1" * 64,
        "first_seen_at": old,
        "occurrences": 1,
    }
    with box.engine.begin() as conn:
        conn.execute(insert(q), [{**common, **row} for row in rows])

    report = box.purge(batch_size=1)

    assert report.quarantine_deleted == 1
    with box.engine.connect() as conn:
        left = set(conn.execute(select(q.c.command_id)).scalars())
    assert left == {"open-old", "resolved-new"}


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": "10"}, "batch_size"),
        ({"max_batches": 0}, "max_batches"),
        ({"now": dt.datetime(2026, 1, 1)}, "timezone-aware"),
    ],
)
def test_bad_purge_arguments_are_refused(box: inboxguard.Inbox, clock, kwargs, fragment) -> None:
    seed(box, ["x"], processed_at=clock.now - 20 * DAY)
    with pytest.raises(inboxguard.ConfigurationError, match=fragment):
        box.purge(**kwargs)
    assert count_rows(box) == 1  # nothing lost


def test_two_purgers_at_once_one_works_one_returns(box: inboxguard.Inbox, clock, db_url) -> None:
    seed(box, [f"old-{i}" for i in range(40)], processed_at=clock.now - 20 * DAY)
    other_engine = create_engine(db_url)  # another instance: its own engine and connections
    other = inboxguard.Inbox(
        other_engine, retention=box.retention, table_prefix=box.table_prefix, clock=clock
    )
    seen: list[inboxguard.PurgeReport] = []

    def during_first_batch(report: inboxguard.PurgeReport) -> None:
        if not seen:
            seen.append(other.purge(batch_size=10))

    try:
        report = box.purge(batch_size=10, progress=during_first_batch)
    finally:
        other_engine.dispose()
    [second] = seen
    if database_for(box.engine.dialect).purge(box.tables).single_purger:
        assert not second.acquired
        assert second.deleted == 0
        assert "another purger holds the lock" in second.summary()
        assert report.deleted == 40
    else:  # SQLite: no cross-process lock; both run, each batch atomic
        assert second.acquired
        assert report.deleted + second.deleted == 40
    assert count_rows(box) == 0


# SQLite has no row locks (one writer at a time), so this runs on the other two.
@pytest.mark.parametrize("db_url", ["postgresql", "mysql"], indirect=True)
def test_purge_skips_a_row_another_transaction_holds(box: inboxguard.Inbox, clock) -> None:
    seed(box, [f"old-{i}" for i in range(10)], processed_at=clock.now - 20 * DAY)
    c = box.tables.inbox.c
    holder = box.engine.connect()
    try:
        holder.begin()
        holder.execute(
            update(box.tables.inbox)
            .where(c.consumer == "seed", c.command_id == "old-3")  # by key: locks one row
            .values(result='"held"')
        )
        outcome: list[inboxguard.PurgeReport] = []
        thread = threading.Thread(target=lambda: outcome.append(box.purge(batch_size=3)))
        thread.start()
        wait_until(lambda: bool(outcome), timeout=20)  # finished while the lock is still held
        thread.join()
        assert outcome[0].deleted == 9
        assert stored_ids(box) == {"old-3"}
        holder.commit()
    finally:
        holder.close()
    assert box.purge().deleted == 1


def test_purge_holds_no_lock_between_batches(box: inboxguard.Inbox, clock, db_url) -> None:
    """A claim waits for one batch at most: between batches the purge holds nothing,
    so claims on rows the next batch will take go through with a tiny lock timeout."""
    for i in range(30):  # distinct expiries: batches take them in this order
        seed(box, [f"old-{i:02}"], processed_at=clock.now - 20 * DAY + i * SECOND)
    other_engine = create_engine(db_url)
    impatient = inboxguard.Inbox(
        other_engine,
        retention=box.retention,
        table_prefix=box.table_prefix,
        clock=clock,
        lock_timeout=dt.timedelta(milliseconds=50),
    )
    outcomes: list[tuple[int, str, bool]] = []

    def between_batches(report: inboxguard.PurgeReport) -> None:
        if report.batches > 2:
            return
        for command_id in ("old-29", f"old-{report.batches - 1:02}"):
            with (
                other_engine.begin() as conn,
                impatient.guard(conn, consumer="seed", command_id=command_id, payload={}) as entry,
            ):
                outcomes.append((report.batches, command_id, entry.duplicate))

    try:
        report = box.purge(batch_size=10, progress=between_batches)
    finally:
        other_engine.dispose()
    # old-29 is still there (a later batch takes it): a duplicate, no wait; old-00 and
    # old-01 were just deleted: a redelivery claims them afresh (beyond the horizon,
    # only a guard without sent_at lets that happen)
    assert outcomes == [
        (1, "old-29", True),
        (1, "old-00", False),
        (2, "old-29", True),
        (2, "old-01", False),
    ]
    assert report.deleted == 30
    assert stored_ids(box) == {"old-00", "old-01"}
