"""BT19: a batch's claim stays linear in its size.

On PostgreSQL the one-statement claim must never compare every key with
every inserted row: the plan of the statement a real ``guard_batch`` sends,
asked of the server with a ``work_mem`` too small to hash the batch, has no
per-row subplan. On every database a batch of 10,000 commands is claimed
whole, and delivered again is 10,000 duplicates.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine

import inboxguard
from tests.conftest import unique

BIG = 10_000


@pytest.fixture
def box(engine: Engine, prefix: str) -> Iterator[inboxguard.Inbox]:
    """An inbox with a lock timeout (the claim's longest form) on each database."""
    inbox = inboxguard.Inbox(
        engine,
        retention=dt.timedelta(days=1),
        table_prefix=prefix,
        lock_timeout=dt.timedelta(seconds=5),
    )
    inbox.create_schema()
    yield inbox
    inbox.drop_schema()


def test_bt19_a_batch_of_ten_thousand_is_claimed_whole(box: inboxguard.Inbox) -> None:
    commands = [(f"k-{i}", {"i": i}) for i in range(BIG)]
    with box.engine.begin() as conn:
        with box.guard_batch(conn, consumer="c", commands=commands) as batch:
            assert len(batch.fresh) == BIG
            for entry in batch.fresh[:3]:
                entry.result = {"ok": entry.command_id}
    with box.engine.begin() as conn:
        with box.guard_batch(conn, consumer="c", commands=commands) as batch:
            assert len(batch.duplicates) == BIG
            assert [e.result for e in batch[:4]] == [
                {"ok": "k-0"},
                {"ok": "k-1"},
                {"ok": "k-2"},
                None,
            ]


@pytest.mark.postgresql
def test_bt19_the_postgresql_claim_plans_no_per_row_subplan(pg_url: str) -> None:
    engine = create_engine(pg_url)
    box = inboxguard.Inbox(
        engine,
        retention=dt.timedelta(days=1),
        table_prefix=unique("t") + "_",
        lock_timeout=dt.timedelta(seconds=5),
    )
    box.create_schema()
    sent: list[tuple[str, Any]] = []

    def keep(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        if statement.startswith("WITH"):
            sent.append((statement, params))

    # A listener also keeps the claim on SQLAlchemy's execution path, where it is seen.
    event.listen(engine, "before_cursor_execute", keep)
    try:
        half = [(f"k-{i}", {}) for i in range(0, 4000, 2)]
        with engine.begin() as conn, box.guard_batch(conn, consumer="c", commands=half):
            pass
        commands = [(f"k-{i}", {}) for i in range(4000)]
        with engine.begin() as conn, box.guard_batch(conn, consumer="c", commands=commands):
            pass
        statement, params = sent[-1]
        with engine.connect() as conn:
            raw = conn.connection.dbapi_connection
            assert raw is not None
            with raw.cursor() as cursor:
                cursor.execute("SET work_mem = '64kB'")
                cursor.execute("EXPLAIN " + statement, params)
                plan = "\n".join(row[0] for row in cursor.fetchall())
            raw.rollback()
        assert "SubPlan" not in plan, plan
    finally:
        event.remove(engine, "before_cursor_execute", keep)
        box.drop_schema()
        engine.dispose()
