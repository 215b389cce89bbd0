"""Helpers of the retention tests: polling, seeding and reading rows."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import func, insert, select

import inboxguard
from tests.helpers import wait_until

__all__ = ["DAY", "WORKED_EXAMPLE", "count_rows", "policy", "seed", "stored_ids", "wait_until"]

DAY = dt.timedelta(days=1)


def policy() -> inboxguard.RetentionPolicy:
    """The policy of these tests (a fresh one each time: checks record windows in it):
    evidence kept 10 days, results 2."""
    return inboxguard.RetentionPolicy(
        replay=dt.timedelta(days=10), margin=dt.timedelta(0), result_ttl=dt.timedelta(days=2)
    )


def seed(
    inbox: inboxguard.Inbox,
    ids: list[str],
    *,
    processed_at: dt.datetime,
    consumer: str = "seed",
    result: str | None = '{"ok":true}',
) -> None:
    """Insert evidence rows directly (fast), as claims at ``processed_at`` would."""
    policy = inbox.retention
    ttl = policy.result_ttl
    rows = [
        {
            "consumer": consumer,
            "command_id": command_id,
            "digest": inboxguard.digest_of({}),  # the payload the tests redeliver
            "result": result,
            "processed_at": processed_at,
            "expires_at": processed_at + policy.horizon,
            "result_expires_at": processed_at + ttl if ttl else None,
        }
        for command_id in ids
    ]
    with inbox.engine.begin() as conn:
        for start in range(0, len(rows), 1000):
            conn.execute(insert(inbox.tables.inbox), rows[start : start + 1000])


def stored_ids(inbox: inboxguard.Inbox, consumer: str | None = None) -> set[str]:
    """Command IDs of the evidence rows (of ``consumer`` when given)."""
    c = inbox.tables.inbox.c
    stmt = select(c.command_id)
    if consumer is not None:
        stmt = stmt.where(c.consumer == consumer)
    with inbox.engine.connect() as conn:
        return set(conn.execute(stmt).scalars())


def count_rows(inbox: inboxguard.Inbox) -> int:
    """How many evidence rows are stored."""
    with inbox.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(inbox.tables.inbox)).scalar_one())


#: The worked example of docs/retention.md, importable as
#: ``--policy tests.inbox.retention.helpers:WORKED_EXAMPLE``.
WORKED_EXAMPLE = inboxguard.RetentionPolicy(
    visibility_timeout=dt.timedelta(hours=1),
    dead_letter_replay=dt.timedelta(days=30),
    dispute=dt.timedelta(days=60),
    margin=dt.timedelta(days=2),
    result_ttl=dt.timedelta(days=7),
)
