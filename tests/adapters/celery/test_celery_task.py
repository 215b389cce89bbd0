"""The guarded task's decisions, run in-process with ``apply()`` on SQLite.

The worker/broker behaviour (acks, dead-lettering, kill -9) is proven by the
end-to-end tests next to this module; these pin the mapping of each inbox
outcome to a Celery outcome.
"""

from __future__ import annotations

import datetime as dt
import logging
import sqlite3
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery, Task
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, func, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.celery import (
    SENT_AT_HEADER,
    InboxTask,
    check_alignment,
    inbox_task,
    replay_windows,
    stamp_sent_at,
)
from tests.conftest import unique


@pytest.fixture
def app() -> Celery:
    return Celery(unique("app"), broker="memory://", set_as_current=False)


@pytest.fixture
def setup(sqlite_url: str) -> Iterator[tuple[inboxguard.Inbox, Any, Table]]:
    engine = create_engine(sqlite_url)
    box = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix="t_")
    box.create_schema()
    meta = MetaData()
    ledger = Table(
        "ledger", meta, Column("id", Integer, primary_key=True), Column("ref", String(64))
    )
    meta.create_all(engine)
    yield box, sessionmaker(engine), ledger
    engine.dispose()


def _rows(box: inboxguard.Inbox, ledger: Table) -> int:
    with box.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(ledger)).scalar_one())


def test_duplicate_with_new_task_id_returns_stored_result_without_running(app, setup) -> None:
    """A second delivery of a command (new task id) returns the first result; the body ran once."""
    box, factory, ledger = setup

    @app.task(
        base=InboxTask,
        inbox=box,
        inbox_session_factory=factory,
        inbox_command_id="ref",
        inbox_consumer="c",
    )
    def apply_ref(ref: str, amount: int) -> dict[str, Any]:
        inboxguard.current_session().execute(ledger.insert().values(ref=ref))
        return {"ref": ref, "amount": amount}

    first = apply_ref.apply(args=("r1", 5), task_id="a")
    second = apply_ref.apply(args=("r1", 5), task_id="b")
    assert first.get() == second.get() == {"ref": "r1", "amount": 5}
    assert _rows(box, ledger) == 1


def test_mismatch_is_quarantined_and_rejected_never_autoretried(app, setup) -> None:
    """Same command, other payload: REJECTED, quarantined with the message, body not rerun."""
    box, factory, ledger = setup
    calls: list[int] = []

    @inbox_task(
        box,
        session_factory=factory,
        command_id=lambda ref, amount: ref,
        consumer="c",
        name=unique("task"),
        autoretry_for=(Exception,),
    )
    def apply_ref(ref: str, amount: int) -> int:
        calls.append(amount)
        inboxguard.current_session().execute(ledger.insert().values(ref=ref))
        return amount

    apply_ref.apply(args=("r1", 5))
    result = apply_ref.apply(args=("r1", 6), headers={"x-trace": "t1"})
    assert result.state == "REJECTED"
    assert calls == [5]
    assert _rows(box, ledger) == 1
    [record] = box.quarantined("c")
    assert record.reason == "payload_mismatch"
    assert record.details["task"] == apply_ref.name
    assert record.details["args"] == ["r1", 6]
    assert record.details["headers"]["x-trace"] == "t1"


def test_message_older_than_horizon_is_quarantined_and_rejected(app, setup) -> None:
    """A sent-at stamp older than the evidence horizon is refused, not processed as new."""
    box, factory, ledger = setup

    @inbox_task(box, session_factory=factory, command_id="ref", consumer="c", name=unique("t"))
    def apply_ref(ref: str) -> None:
        inboxguard.current_session().execute(ledger.insert().values(ref=ref))

    old = (dt.datetime.now(dt.UTC) - dt.timedelta(days=2)).isoformat()
    result = apply_ref.apply(args=("r1",), headers={SENT_AT_HEADER: old})
    assert result.state == "REJECTED"
    assert _rows(box, ledger) == 0
    assert [r.reason for r in box.quarantined("c")] == ["beyond_retention"]


def _locked() -> OperationalError:
    return OperationalError("INSERT", {}, sqlite3.OperationalError("database is locked"))


def test_transient_database_error_is_retried_not_dropped(app, setup) -> None:
    """A lock error rolls back and retries; the retry applies the command exactly once."""
    box, factory, ledger = setup
    attempts: list[int] = []

    @inbox_task(box, session_factory=factory, command_id="ref", consumer="c", name=unique("t"))
    def apply_ref(ref: str) -> str:
        inboxguard.current_session().execute(ledger.insert().values(ref=ref))
        attempts.append(1)
        if len(attempts) == 1:
            raise _locked()
        return "done"

    assert apply_ref.apply(args=("r1",)).get() == "done"
    assert len(attempts) == 2
    assert _rows(box, ledger) == 1


def test_retries_exhausted_is_quarantined_and_rejected(app, setup) -> None:
    """When the retry budget is spent the message is quarantined and rejected, not acked away."""
    box, factory, _ = setup

    @inbox_task(
        box,
        session_factory=factory,
        command_id="ref",
        consumer="c",
        name=unique("t"),
        max_retries=1,
    )
    def apply_ref(ref: str) -> None:
        raise _locked()

    result = apply_ref.apply(args=("r1",))
    assert result.state == "REJECTED"
    assert [r.reason for r in box.quarantined("c")] == ["retries_exhausted"]


def test_a_final_handler_failure_is_quarantined_before_celery_fails_it(app, setup) -> None:
    """Celery rejects a failed task without requeue, which drops it on Redis: a
    quarantine record (``handler_failed``, with the delivery's arguments) holds the
    command first, once, after the task's own retries are spent."""
    box, factory, ledger = setup
    calls: list[int] = []

    @inbox_task(
        box,
        session_factory=factory,
        command_id="ref",
        consumer="c",
        name=unique("t"),
        autoretry_for=(ValueError,),
        max_retries=1,
        retry_backoff=False,
        default_retry_delay=0,
    )
    def apply_ref(ref: str) -> None:
        inboxguard.current_session().execute(ledger.insert().values(ref=ref))
        calls.append(1)
        raise ValueError("the handler has a bug")

    result = apply_ref.apply(args=("r1",))
    assert result.state == "FAILURE"
    assert len(calls) == 2  # the first attempt and its one retry
    assert _rows(box, ledger) == 0  # every attempt rolled back
    records = box.quarantined("c")
    assert [(r.command_id, r.reason) for r in records] == [("r1", "handler_failed")]
    assert "r1" in str(records[0].details)


def test_publish_stamp_is_kept_across_retries() -> None:
    """The receiver stamps a fresh publish and leaves an existing stamp (a retry) alone."""
    headers: dict[str, Any] = {}
    stamp_sent_at(headers=headers)
    sent = dt.datetime.fromisoformat(headers[SENT_AT_HEADER])
    assert sent.utcoffset() == dt.timedelta(0)
    retried = {SENT_AT_HEADER: "2026-01-01T00:00:00+00:00"}
    stamp_sent_at(headers=retried)
    assert retried[SENT_AT_HEADER] == "2026-01-01T00:00:00+00:00"


def test_alignment_discovers_visibility_timeout_and_retry_schedule(setup) -> None:
    """Redis visibility timeout and max_retries x backoff are checked against the horizon."""
    box, factory, _ = setup  # horizon: 1 day
    app = Celery(unique("app"), broker="redis://127.0.0.1:6379/0", set_as_current=False)
    app.conf.broker_transport_options = {"visibility_timeout": 7200}

    @app.task(
        base=InboxTask,
        inbox=box,
        inbox_session_factory=factory,
        inbox_command_id="ref",
        max_retries=5,
        retry_backoff_max=60,
        default_retry_delay=10,
        name="a.b",
    )
    def apply_ref(ref: str) -> None:
        return None

    # shared tasks of other tests are registered in every app: look at ours only
    [found] = [w for w in replay_windows(app) if w.task == "a.b"]
    assert found.windows == {
        "visibility_timeout": dt.timedelta(hours=2),
        "retry_schedule": dt.timedelta(minutes=5),
    }
    check_alignment(app)
    app.conf.broker_transport_options = {"visibility_timeout": 2 * 86400}
    with pytest.raises(inboxguard.RetentionMisalignedError, match="visibility_timeout"):
        check_alignment(app)
    app.conf.broker_transport_options = {}
    app.conf.inboxguard_replay_windows = {"dead_letter_replay": dt.timedelta(days=3)}
    with pytest.raises(inboxguard.RetentionMisalignedError, match="dead_letter_replay"):
        check_alignment(app)


def test_visibility_timeout_not_longer_than_the_claim_wait_warns_at_start(setup, caplog) -> None:
    """A Redis delivery waiting on another worker's claim must not be redelivered meanwhile."""
    box, factory, _ = setup
    app = Celery(unique("app"), broker="redis://127.0.0.1:6379/0", set_as_current=False)

    @app.task(
        base=InboxTask, inbox=box, inbox_session_factory=factory, inbox_command_id="ref", name="v.w"
    )
    def apply_ref(ref: str) -> None:
        return None

    wait = box.lock_timeout
    assert wait is not None
    app.conf.broker_transport_options = {"visibility_timeout": wait.total_seconds()}
    with caplog.at_level(logging.WARNING, logger="inboxguard"):
        check_alignment(app)
    [warning] = [r for r in caplog.records if "v.w" in r.getMessage()]
    assert "visibility_timeout" in warning.getMessage()
    assert "lock_timeout" in warning.getMessage()
    caplog.clear()
    app.conf.broker_transport_options = {"visibility_timeout": wait.total_seconds() + 1}
    with caplog.at_level(logging.WARNING, logger="inboxguard"):
        check_alignment(app)
    assert not [r for r in caplog.records if "v.w" in r.getMessage()]


def test_acks_late_off_accepted_still_warns_loudly(setup) -> None:
    """Turning acks_late off on a guarded task, with the loss accepted
    (``inbox_accept_early_ack=True``), raises a RuntimeWarning when it is bound."""
    box, factory, _ = setup
    app = Celery(unique("app"), broker="memory://", set_as_current=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        @app.task(
            base=InboxTask,
            inbox=box,
            inbox_session_factory=factory,
            inbox_command_id="ref",
            acks_late=False,
            inbox_accept_early_ack=True,
            name=unique("t"),
        )
        def apply_ref(ref: str) -> None:
            return None

        app.finalize()
        _ = apply_ref.acks_late
    assert any("acks_late=False" in str(w.message) for w in caught)


def test_claim_held_by_another_transaction_is_retried_then_quarantined(pg_url, prefix) -> None:
    """A claim another transaction holds raises InProgressError inside the task: it is
    retried (never acked and dropped); when retries run out the message is quarantined."""
    engine = create_engine(pg_url)
    box = inboxguard.Inbox(
        engine,
        retention=dt.timedelta(days=1),
        table_prefix=prefix,
        lock_timeout=dt.timedelta(milliseconds=100),
    )
    box.create_schema()
    factory = sessionmaker(engine)
    runs: list[str] = []
    try:

        @inbox_task(
            box, session_factory=factory, command_id="ref", consumer="c", name=unique("t"),
            max_retries=2, retry_backoff_max=1,
        )  # fmt: skip
        def apply_ref(ref: str) -> str:
            runs.append(ref)
            return ref

        holder = factory()
        with holder.begin():
            with box.guard(holder, consumer="c", command_id="r1", payload=apply_ref_payload()):
                result = apply_ref.apply(args=("r1",))
        holder.close()
        assert result.state == "REJECTED"
        assert runs == []
        [record] = box.quarantined("c")
        assert record.reason == "retries_exhausted"
        assert record.details["retries"] == 2
    finally:
        box.drop_schema()
        engine.dispose()


def apply_ref_payload() -> dict[str, Any]:
    """The payload the adapter digests for ``apply_ref("r1")``."""
    return {"args": ["r1"], "kwargs": {}}


def test_bound_task_with_own_base_uses_argument_name(setup) -> None:
    """bind=True and a base class of the user's own still guard by the named argument."""
    box, factory, ledger = setup

    class Audited(Task):
        audited = True

    @inbox_task(
        box, session_factory=factory, command_id="ref", consumer="c", name=unique("t"),
        bind=True, base=Audited,
    )  # fmt: skip
    def apply_ref(self, ref: str, amount: int) -> int:
        assert self.audited
        inboxguard.current_session().execute(ledger.insert().values(ref=ref))
        return amount

    assert isinstance(apply_ref, InboxTask)
    assert apply_ref.apply(kwargs={"ref": "r1", "amount": 3}).get() == 3
    assert apply_ref.apply(kwargs={"ref": "r1", "amount": 3}).get() == 3
    assert _rows(box, ledger) == 1
    assert box.lookup("c", "r1") is not None


def test_unknown_argument_name_fails_at_decoration(setup) -> None:
    """A command_id naming no argument is a ConfigurationError naming the arguments."""
    box, factory, _ = setup
    with pytest.raises(inboxguard.ConfigurationError, match=r"names no argument.*ref, amount"):

        @inbox_task(box, session_factory=factory, command_id="order_id", name=unique("t"))
        def apply_ref(ref: str, amount: int) -> None:
            return None


def test_direct_call_is_guarded_and_raises_the_inbox_errors(setup) -> None:
    """Calling the task as a function still guards it; a mismatch raises
    PayloadMismatchError itself (no worker to reject to)."""
    box, factory, ledger = setup

    @inbox_task(box, session_factory=factory, command_id="ref", consumer="c", name=unique("t"))
    def apply_ref(ref: str, amount: int) -> int:
        inboxguard.current_session().execute(ledger.insert().values(ref=ref))
        return amount

    assert apply_ref("r1", 4) == 4
    assert apply_ref("r1", 4) == 4
    with pytest.raises(inboxguard.PayloadMismatchError):
        apply_ref("r1", 5)
    assert _rows(box, ledger) == 1


def test_a_missing_sent_time_is_logged_once_or_refused_when_required(
    app, setup, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 19: a task without a sent time skipped the age check silently; it
    is logged once per task, and ``inbox_require_sent_at`` refuses it."""
    box, factory, ledger = setup

    @inbox_task(box, session_factory=factory, command_id="ref", consumer="c", name=unique("t"))
    def loose(ref: str) -> None:
        inboxguard.current_session().execute(ledger.insert().values(ref=ref))

    @inbox_task(
        box,
        session_factory=factory,
        command_id="ref",
        consumer="strict",
        name=unique("t"),
        inbox_require_sent_at=True,
    )
    def strict(ref: str) -> None:
        inboxguard.current_session().execute(ledger.insert().values(ref=ref))

    with caplog.at_level(logging.WARNING, logger="inboxguard.celery"):
        assert loose.apply(args=("r1",)).state == "SUCCESS"
        assert loose.apply(args=("r2",)).state == "SUCCESS"
    assert caplog.text.count("received a message with no sent time") == 1
    assert "inbox_require_sent_at=True" in caplog.text
    assert strict.apply(args=("r3",)).state == "REJECTED"
    [record] = box.quarantined("strict")
    assert (record.command_id, record.reason) == ("r3", "missing_sent_at")
    now = dt.datetime.now(dt.UTC).isoformat()
    assert strict.apply(args=("r4",), headers={SENT_AT_HEADER: now}).state == "SUCCESS"
    assert _rows(box, ledger) == 3
