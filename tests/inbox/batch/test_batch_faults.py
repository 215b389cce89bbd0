"""BT15: guard_batch reaches the fault-injection kit's seams, once per fresh
entry, on PostgreSQL, MariaDB and SQLite; a crash there commits nothing."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from inboxguard import PayloadEncodingError
from inboxguard._core import faults
from inboxguard.testing import Crash, FaultPoint, crash_at
from tests.helpers import apply
from tests.inbox.batch.conftest import Setup

#: A batch of three new commands around one committed before ("done").
COMMANDS = [("a", {"n": 1}), ("done", {}), ("b", {"n": 2}), ("c", {"n": 3})]


def _single(s: Setup, command_id: str, payload: object) -> None:
    with Session(s.engine) as session, session.begin():
        with s.inbox.guard(session, consumer="c", command_id=command_id, payload=payload) as e:
            apply(session.connection(), s.accounts, s.ledger, command_id, 1)
            e.result = {"applied": command_id}


def _deliver(s: Setup, result: Any = None) -> list[str]:
    """Deliver the whole batch: apply each fresh entry, assign its result, commit."""
    with Session(s.engine) as session, session.begin():
        with s.inbox.guard_batch(session, consumer="c", commands=COMMANDS) as batch:
            for entry in batch.fresh:
                apply(session.connection(), s.accounts, s.ledger, entry.command_id, 1)
                entry.result = result or {"applied": entry.command_id}
    return [e.outcome for e in batch]


def _inbox_rows(s: Setup) -> int:
    with s.engine.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(s.inbox.tables.inbox)) or 0)


def _applied_once(s: Setup) -> None:
    """Every command of the batch applied once, with its stored result."""
    assert s.ledger_ids() == ["a", "b", "c", "done"]
    assert _inbox_rows(s) == 4
    for cid in ("a", "b", "c"):
        found = s.inbox.lookup("c", cid)
        assert found is not None
        assert found.result == {"applied": cid}


def test_bt15_a_crash_at_handler_runs_commits_nothing(setup: Setup) -> None:
    """A crash for one fresh entry before the block gets the batch: the block
    never runs, no claim and no change commits, and redelivering the whole
    batch applies every command once."""
    s = setup
    _single(s, "done", {})
    ran: list[str] = []
    with crash_at(FaultPoint.HANDLER_RUNS, key="b") as tap, pytest.raises(Crash) as crash:
        with Session(s.engine) as session, session.begin():
            with s.inbox.guard_batch(session, consumer="c", commands=COMMANDS) as batch:
                ran += [e.command_id for e in batch]
    assert (crash.value.point, crash.value.key) == (FaultPoint.HANDLER_RUNS, "b")
    assert ran == []
    assert dict(tap.runs) == {"a": 1, "b": 1}  # input order; the duplicate is no run
    assert s.ledger_ids() == ["done"]
    assert _inbox_rows(s) == 1
    assert faults.hook is None
    assert _deliver(s) == ["fresh", "duplicate", "fresh", "fresh"]
    _applied_once(s)


def test_bt15_a_crash_before_commit_commits_nothing(setup: Setup) -> None:
    """A crash after the block and the stored results, before the caller's
    commit: the claims, results and changes roll back, and the retry applies
    each command exactly once."""
    s = setup
    _single(s, "done", {})
    with crash_at(FaultPoint.BEFORE_COMMIT, key="c") as tap:
        with pytest.raises(Crash) as crash:
            _deliver(s)
        assert (crash.value.point, crash.value.key) == (FaultPoint.BEFORE_COMMIT, "c")
        assert s.ledger_ids() == ["done"]
        assert _inbox_rows(s) == 1
        assert _deliver(s) == ["fresh", "duplicate", "fresh", "fresh"]
    assert dict(tap.runs) == {"a": 2, "b": 2, "c": 2}  # the crashed run and the retry
    _applied_once(s)
    assert _deliver(s) == ["duplicate"] * 4
    assert s.ledger_ids() == ["a", "b", "c", "done"]


def test_bt15_before_commit_comes_after_the_results_and_a_normal_exit(setup: Setup) -> None:
    """A block that raises, or a result that cannot be stored, never reaches
    the point (the caller sees its own error); the same batch exiting
    normally does."""
    s = setup
    with crash_at(FaultPoint.BEFORE_COMMIT) as tap:
        with pytest.raises(RuntimeError, match="handler failed"):
            with Session(s.engine) as session, session.begin():
                with s.inbox.guard_batch(session, consumer="c", commands=COMMANDS):
                    raise RuntimeError("handler failed")
        with pytest.raises(PayloadEncodingError, match=r"batch\[0\]\.result"):
            _deliver(s, result=object())
        assert tap.crashes == []
        with pytest.raises(Crash, match="before_commit for 'a'"):
            _deliver(s)
    assert _inbox_rows(s) == 0
    assert s.ledger_ids() == []
    assert _deliver(s) == ["fresh"] * 4
    assert s.ledger_ids() == ["a", "b", "c", "done"]


def test_bt15_duplicates_reach_no_point_and_an_unmatched_kit_changes_nothing(
    setup: Setup,
) -> None:
    """Only fresh entries reach the points: a rule for a duplicate's ID, or
    for an ID outside the batch, never fires, and the batch commits as it
    does with nothing armed."""
    s = setup
    _single(s, "done", {})
    with crash_at(FaultPoint.HANDLER_RUNS, key="done") as first:
        first.crash_at(FaultPoint.BEFORE_COMMIT, key="done")
        first.crash_at(FaultPoint.BEFORE_COMMIT, key="elsewhere")
        assert _deliver(s) == ["fresh", "duplicate", "fresh", "fresh"]
    assert first.crashes == []
    assert dict(first.runs) == {"a": 1, "b": 1, "c": 1}
    _applied_once(s)
    assert faults.hook is None
    assert _deliver(s) == ["duplicate"] * 4
    assert s.ledger_ids() == ["a", "b", "c", "done"]


def test_bt15_a_released_entry_reaches_before_commit_too(setup: Setup) -> None:
    """A released entry was handed to the block, so it reaches the point as
    well: a crash keyed by it rolls back the whole batch, its commit included."""
    s = setup
    with crash_at(FaultPoint.BEFORE_COMMIT, key="b") as tap:
        with pytest.raises(Crash), Session(s.engine) as session, session.begin():
            with s.inbox.guard_batch(session, consumer="c", commands=COMMANDS) as batch:
                for entry in batch.fresh:
                    if entry.command_id == "b":
                        entry.release()  # as if it failed in its savepoint
                    else:
                        apply(session.connection(), s.accounts, s.ledger, entry.command_id, 1)
    assert [c.key for c in tap.crashes] == ["b"]
    assert s.ledger_ids() == []
    assert _inbox_rows(s) == 0
