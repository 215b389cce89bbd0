"""The round trips a guarded Celery task costs on PostgreSQL, read off the
wire: BEGIN with the guard's SAVEPOINT (one query), the claim, the body's own
statement, the result store, RELEASE with COMMIT (one query); a redelivery of
a committed command: BEGIN with SAVEPOINT, the claim, RELEASE with COMMIT.
Nothing else (no check, lookup or session set-up) per delivery."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from celery.app.trace import build_tracer
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
        "BEGIN + savepoint + claim",
        "body INSERT",
        "result store + release + COMMIT",
    ]
    assert kinds == fresh_kinds, fresh.statements
    kinds = again.kinds(prefix, f"{prefix}ledger")
    assert kinds == ["BEGIN + savepoint + claim", "release + COMMIT"], again.statements


def test_c29_a_task_that_ignores_its_result_sends_no_result_store(
    one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    """A worker's delivery of a task with ``ignore_result`` returns into the
    void, and so would a duplicate's replay: the guard sends no result store
    and the evidence row holds no result; the duplicate still runs nothing.
    An eager call of the same task (its caller reads the value) keeps it."""
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
        ignore_result=True,
    )
    def apply_ref(ref: str) -> dict[str, Any]:
        inboxguard.current_session().execute(ledger.insert().values(ref=ref))
        return {"applied": ref}

    worker_run = build_tracer(apply_ref.name, apply_ref, app=app, eager=False)

    def deliver(ref: str, task_id: str) -> None:
        """What a worker runs for one delivery (not eager, not a direct call)."""
        sent = dt.datetime.now(dt.UTC).isoformat()
        request = {"id": task_id, "headers": {SENT_AT_HEADER: sent}, "delivery_info": {}}
        traced_run = worker_run(task_id, (ref,), {}, request)
        assert traced_run.info is None or traced_run.info == {"applied": ref}, traced_run

    try:
        deliver("r-0", "a")  # the first delivery opens the connection
        with traced(engine, tmp_path) as fresh:
            deliver("r-1", "b")
        with traced(engine, tmp_path) as again:
            deliver("r-1", "c")  # the same command, a new task id
        eager = apply_ref.apply(
            args=("r-2",),
            task_id="d",
            headers={SENT_AT_HEADER: dt.datetime.now(dt.UTC).isoformat()},
        )
        with engine.connect() as conn:
            stored = dict(
                conn.exec_driver_sql(f"SELECT command_id, result FROM {prefix}inbox").all()
            )
            applied = sorted(ref for _, ref in conn.execute(ledger.select()).all())
    finally:
        ledger.drop(engine)
        inbox.drop_schema()

    assert fresh.kinds(prefix, f"{prefix}ledger") == [
        "BEGIN + savepoint + claim",
        "body INSERT",
        "release + COMMIT",
    ], fresh.statements
    kinds = again.kinds(prefix, f"{prefix}ledger")
    assert kinds == ["BEGIN + savepoint + claim", "release + COMMIT"], again.statements
    assert applied == ["r-0", "r-1", "r-2"]
    assert stored["r-0"] is None
    assert stored["r-1"] is None
    assert eager.get() == {"applied": "r-2"}
    assert stored["r-2"] is not None  # an eager caller reads the result


def test_c29_the_request_setting_decides_before_the_task_s(
    one_connection: Engine, prefix: str
) -> None:
    """A delivery whose message asks for its result (``ignore_result`` false
    in the request) keeps it even on a task that ignores results, and the
    other way round: the request's setting decides, as it does for Celery."""
    engine = one_connection
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=7), table_prefix=prefix)
    inbox.create_schema()
    app = Celery(unique("app"), broker="memory://", backend="cache+memory://", set_as_current=False)
    tasks = {}
    for ignore in (True, False):

        @app.task(
            base=InboxTask,
            inbox=inbox,
            inbox_session_factory=sessionmaker(engine),
            inbox_command_id="ref",
            name=unique("echo"),
            ignore_result=ignore,
            inbox_consumer=f"echo.{ignore}",
        )
        def echo(ref: str) -> str:
            return ref

        tasks[ignore] = echo

    def deliver(task: Any, ref: str, *, ignore_result: bool) -> None:
        run = build_tracer(task.name, task, app=app, eager=False)
        sent = dt.datetime.now(dt.UTC).isoformat()
        request = {
            "id": unique("t"),
            "headers": {SENT_AT_HEADER: sent},
            "delivery_info": {},
            "ignore_result": ignore_result,
        }
        run(request["id"], (ref,), {}, request)

    try:
        deliver(tasks[True], "kept", ignore_result=False)
        deliver(tasks[False], "dropped", ignore_result=True)
        with engine.connect() as conn:
            stored = dict(
                conn.exec_driver_sql(f"SELECT command_id, result FROM {prefix}inbox").all()
            )
    finally:
        inbox.drop_schema()
    assert stored == {"kept": '"kept"', "dropped": None}
