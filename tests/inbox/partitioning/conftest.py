"""A partitioned inbox on PostgreSQL with a clock the test moves."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

import inboxguard
from tests.conftest import FakeClock

#: Evidence horizon of the partitioned inboxes in these tests.
HORIZON = dt.timedelta(days=2)
#: Noon on the first day, so a day boundary is half a day away.
START = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)


@pytest.fixture
def pg_engine(pg_url: str) -> Iterator[Engine]:
    """An engine on the session's PostgreSQL database."""
    engine = create_engine(pg_url)
    yield engine
    engine.dispose()


@pytest.fixture
def day_clock() -> FakeClock:
    """A clock starting at noon, 2026-01-01 UTC."""
    return FakeClock(START)


@pytest.fixture
def pbox(pg_engine: Engine, prefix: str, day_clock: FakeClock) -> Iterator[inboxguard.Inbox]:
    """A daily-partitioned inbox with its own tables."""
    box = inboxguard.Inbox(
        pg_engine, retention=HORIZON, table_prefix=prefix, clock=day_clock, partitioning="daily"
    )
    box.create_schema()
    yield box
    box.drop_schema()


def where_rows(engine: Engine, box: inboxguard.Inbox) -> dict[str, str]:
    """command_id -> the partition holding its evidence."""
    with engine.connect() as conn:
        rows = conn.execute(
            text(f'SELECT command_id, tableoid::regclass::text FROM "{box.tables.inbox.name}"')
        ).all()
    return {command_id: partition.strip('"') for command_id, partition in rows}


def partitions(engine: Engine, box: inboxguard.Inbox) -> list[str]:
    """The names of the inbox's partitions, sorted."""
    with engine.connect() as conn:
        return sorted(
            conn.execute(
                text(
                    "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                    " WHERE i.inhparent = to_regclass(:name)"
                ),
                {"name": f'"{box.tables.inbox.name}"'},
            ).scalars()
        )


def claim(engine: Engine, box: inboxguard.Inbox, command_id: str, payload: object = 1) -> bool:
    """Guard one command in its own transaction; True when it was fresh."""
    with (
        engine.begin() as conn,
        box.guard(conn, consumer="c", command_id=command_id, payload=payload) as entry,
    ):
        return not entry.duplicate


def fill_for_operators(box: inboxguard.Inbox) -> int:
    """What an operator reads: ``c-1`` to ``c-3`` claimed fresh by consumer
    ``billing``, then ``c-2`` redelivered with another payload (refused and
    quarantined). Returns the quarantine record's ID."""
    for n in (1, 2, 3):
        with box.engine.begin() as conn:
            with box.guard(conn, consumer="billing", command_id=f"c-{n}", payload={"n": n}) as e:
                assert not e.duplicate
                e.result = {"applied": n}
    with pytest.raises(inboxguard.PayloadMismatchError), box.engine.begin() as conn:
        with box.guard(conn, consumer="billing", command_id="c-2", payload={"n": 99}):
            pass
    [record] = box.quarantined("billing")
    return record.id
