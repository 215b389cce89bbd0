"""Uniqueness of (consumer, command_id) across partitions: workers whose
clocks straddle a day boundary race the same command IDs into different
partitions, and every command's business row is written exactly once."""

from __future__ import annotations

import datetime as dt
import random
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.engine import Engine

import inboxguard
from inboxguard.errors import InProgressError
from inboxguard.sql.dialects import Claim, Steps
from inboxguard.sql.dialects.postgresql.partitioned import PartitionedPostgresqlInbox
from tests.conftest import FakeClock
from tests.helpers import create_business, wait_until
from tests.inbox.partitioning.conftest import HORIZON, where_rows

BEFORE_MIDNIGHT = dt.datetime(2026, 1, 1, 23, 59, 59, tzinfo=dt.UTC)
AFTER_MIDNIGHT = dt.datetime(2026, 1, 2, 0, 0, 1, tzinfo=dt.UTC)
IDS = [f"cmd-{i}" for i in range(120)]


@pytest.fixture
def straddling(pg_engine: Engine, prefix: str) -> Iterator[list[inboxguard.Inbox]]:
    """Two inboxes on one partitioned table, one clock each side of midnight:
    their claims of one command land in two different partitions."""
    boxes = [
        inboxguard.Inbox(
            pg_engine,
            retention=HORIZON,
            table_prefix=prefix,
            clock=FakeClock(at),
            partitioning="daily",
        )
        for at in (BEFORE_MIDNIGHT, AFTER_MIDNIGHT)
    ]
    boxes[0].create_schema()
    yield boxes
    boxes[0].drop_schema()


def test_racing_workers_across_a_day_boundary_apply_each_command_once(
    pg_engine: Engine, prefix: str, straddling: list[inboxguard.Inbox]
) -> None:
    _accounts, ledger = create_business(pg_engine, prefix)
    gate = threading.Barrier(4)
    errors: list[BaseException] = []

    def worker(box: inboxguard.Inbox, seed: int) -> None:
        order = IDS[:]
        random.Random(seed).shuffle(order)
        try:
            gate.wait(timeout=30)
            for command_id in order:
                for _ in range(20):
                    try:
                        with (
                            pg_engine.begin() as conn,
                            box.guard(
                                conn, consumer="c", command_id=command_id, payload={"n": 1}
                            ) as entry,
                        ):
                            if not entry.duplicate:
                                conn.execute(
                                    ledger.insert().values(command_id=command_id, amount=1)
                                )
                        break
                    except InProgressError:
                        continue
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(straddling[i % 2], i)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    with pg_engine.connect() as conn:
        applied = dict(
            conn.execute(
                select(ledger.c.command_id, func.count()).group_by(ledger.c.command_id)
            ).all()
        )
    assert applied == dict.fromkeys(IDS, 1)
    placed = where_rows(pg_engine, straddling[0])
    assert sorted(placed) == sorted(IDS)
    name = straddling[0].tables.inbox.name
    # The race really crossed partitions: both sides won some commands.
    assert set(placed.values()) == {f"{name}_p20260103", f"{name}_p20260104"}


def test_a_second_claimer_in_another_partition_waits_then_sees_a_duplicate(
    pg_engine: Engine, straddling: list[inboxguard.Inbox]
) -> None:
    first, second = straddling
    outcome: list[bool] = []
    with pg_engine.connect() as holder:
        holder.begin()
        with first.guard(holder, consumer="c", command_id="w", payload=1) as entry:
            assert not entry.duplicate

        def later() -> None:
            with (
                pg_engine.begin() as conn,
                second.guard(conn, consumer="c", command_id="w", payload=1) as entry,
            ):
                outcome.append(entry.duplicate)

        thread = threading.Thread(target=later)
        thread.start()
        wait_until(lambda: _advisory_waiters(pg_engine) == 1, timeout=10)
        holder.commit()
    thread.join(timeout=10)
    assert outcome == [True]
    assert len(where_rows(pg_engine, first)) == 1


def test_without_the_advisory_lock_the_same_race_claims_twice(
    pg_engine: Engine, straddling: list[inboxguard.Inbox], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: with the lock statement skipped, two open transactions
    each claim the command in their own partition. The lock is what the
    tests above rely on."""
    monkeypatch.setattr(PartitionedPostgresqlInbox, "attempt", _attempt_without_lock)
    first, second = straddling
    with pg_engine.connect() as a, pg_engine.connect() as b:
        a.begin()
        b.begin()
        with first.guard(a, consumer="c", command_id="z", payload=1) as one:
            assert not one.duplicate
        with second.guard(b, consumer="c", command_id="z", payload=1) as two:
            assert not two.duplicate
        a.commit()
        b.commit()
    assert _count(pg_engine, first, "z") == 2


def _attempt_without_lock(
    self: PartitionedPostgresqlInbox, params: Mapping[str, Any]
) -> Steps[Claim | None]:
    row = (yield self._claim_stmt, params).first()
    return Claim(True, row[0])


def _count(engine: Engine, box: inboxguard.Inbox, command_id: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(f'SELECT count(*) FROM "{box.tables.inbox.name}" WHERE command_id = :c'),
                {"c": command_id},
            ).scalar_one()
        )


def _advisory_waiters(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                    " AND database = (SELECT oid FROM pg_database"
                    " WHERE datname = current_database())"
                )
            ).scalar_one()
        )
