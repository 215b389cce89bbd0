"""The round trips a guarded Celery task costs on PostgreSQL, read off the
wire: BEGIN, the guard's SAVEPOINT, the claim, the body's own statement, the
result store, RELEASE, COMMIT; a redelivery of a committed command: BEGIN,
SAVEPOINT, the claim, RELEASE, COMMIT. Nothing else
(no check, lookup or session set-up) per delivery."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from sqlalchemy import Column, Integer, MetaData, String, Table
from sqlalchemy.engine import Engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.celery import SENT_AT_HEADER, InboxTask
from tests.adapters.wire import traced
from tests.conftest import unique

pytestmark = pytest.mark.postgresql


def test_guarded_task_sends_claim_body_result_store_and_nothing_else(
    one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    engine = one_connection
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=7), table_prefix=prefix)
    inbox.create_schema()
    ledger = Table(
        f"{prefix}ledger", MetaData(), Column("id", Integer, primary_key=True),
        Column("ref", String(40)),
    )  # fmt: skip
    ledger.create(engine)
    app = Celery(unique("app"), broker="memory://", set_as_current=False)

    @app.task(
        base=InboxTask,
        inbox=inbox,
        inbox_session_factory=sessionmaker(engine),
        inbox_command_id="ref",
        name=unique("apply_ref"),
    )
    def apply_ref(ref: str) -> dict[str, Any]:
        inboxguard.current_session().execute(ledger.insert().values(ref=ref))
        return {"applied": ref}

    def deliver(ref: str, task_id: str) -> None:
        sent = dt.datetime.now(dt.UTC).isoformat()
        result = apply_ref.apply(args=(ref,), task_id=task_id, headers={SENT_AT_HEADER: sent})
        assert result.get() == {"applied": ref}

    try:
        deliver("r-0", "a")  # the first delivery opens the connection
        with traced(engine, tmp_path) as fresh:
            deliver("r-1", "b")
        with traced(engine, tmp_path) as again:
            deliver("r-1", "c")  # the same command, a new task id
    finally:
        ledger.drop(engine)
        inbox.drop_schema()

    kinds = fresh.kinds(prefix, f"{prefix}ledger")
    fresh_kinds = [
        "BEGIN",
        "savepoint",
        "claim",
        "body INSERT",
        "result store",
        "release",
        "COMMIT",
    ]
    assert kinds == fresh_kinds, fresh.statements
    kinds = again.kinds(prefix, f"{prefix}ledger")
    assert kinds == ["BEGIN", "savepoint", "claim", "release", "COMMIT"], again.statements
