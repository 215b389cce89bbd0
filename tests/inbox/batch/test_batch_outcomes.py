"""BT1-BT6: what a batch claim decides per entry, on PostgreSQL, MariaDB and SQLite."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from inboxguard import (
    BatchCommand,
    BatchEntry,
    BeyondRetentionError,
    PayloadEncodingError,
    PayloadMismatchError,
    QuarantineReason,
)
from tests.helpers import apply
from tests.inbox.batch.conftest import RETENTION, Setup, StatementLog


def _apply_fresh(s: Setup, session: Session, entries: list[BatchEntry]) -> None:
    for entry in entries:
        apply(session.connection(), s.accounts, s.ledger, entry.command_id, 1)
        entry.result = {"applied": entry.command_id}


def _single(s: Setup, command_id: str, payload: object) -> None:
    with Session(s.engine) as session, session.begin():
        with s.inbox.guard(session, consumer="c", command_id=command_id, payload=payload) as e:
            apply(session.connection(), s.accounts, s.ledger, command_id, 1)
            e.result = {"applied": command_id}


def test_bt1_fresh_duplicate_and_mismatch_in_one_batch(setup: Setup) -> None:
    """One entry per command in input order: a duplicate gets the stored
    result, a mismatch is refused and quarantined without failing the
    others, fresh entries apply and their results commit with them."""
    s = setup
    _single(s, "a", {"n": 1})
    _single(s, "b", {"n": 2})
    commands = [("d", {"n": 4}), ("a", {"n": 1}), ("b", {"n": 99}), ("c", {"n": 3})]
    with Session(s.engine) as session, session.begin():
        with s.inbox.guard_batch(session, consumer="c", commands=commands) as batch:
            assert [e.command_id for e in batch] == ["d", "a", "b", "c"]
            assert [e.outcome for e in batch] == ["fresh", "duplicate", "refused", "fresh"]
            assert batch[1].result == {"applied": "a"}
            assert isinstance(batch[2].error, PayloadMismatchError)
            assert batch[0].payload == {"n": 4}
            _apply_fresh(s, session, batch.fresh)
    assert s.ledger_ids() == ["a", "b", "c", "d"]
    for cid in ("c", "d"):
        found = s.inbox.lookup("c", cid)
        assert found is not None
        assert found.result == {"applied": cid}
    [record] = s.inbox.quarantined()
    assert (record.command_id, record.reason) == ("b", QuarantineReason.PAYLOAD_MISMATCH)
    # The whole batch again: every entry that committed is now a duplicate.
    with Session(s.engine) as session, session.begin():
        with s.inbox.guard_batch(session, consumer="c", commands=commands) as batch:
            assert [e.outcome for e in batch] == ["duplicate", "duplicate", "refused", "duplicate"]
            assert batch[0].result == {"applied": "d"}
    [record] = s.inbox.quarantined()
    assert record.occurrences == 2


def test_bt1_a_batch_of_one_decides_as_a_larger_batch(setup: Setup) -> None:
    """A batch of one command (PostgreSQL claims it with the single claim's
    statement): fresh with its result stored, then a duplicate with that
    result, then a mismatch refused and quarantined without raising."""
    s = setup
    for expected in ("fresh", "duplicate"):
        with Session(s.engine) as session, session.begin():
            with s.inbox.guard_batch(session, consumer="c", commands=[("a", {"n": 1})]) as batch:
                assert [e.outcome for e in batch] == [expected]
                if expected == "duplicate":
                    assert batch[0].result == {"applied": "a"}
                _apply_fresh(s, session, batch.fresh)
    with Session(s.engine) as session, session.begin():
        with s.inbox.guard_batch(session, consumer="c", commands=[("a", {"n": 2})]) as batch:
            assert [e.outcome for e in batch] == ["refused"]
            assert isinstance(batch[0].error, PayloadMismatchError)
    assert s.ledger_ids() == ["a"]
    found = s.inbox.lookup("c", "a")
    assert found is not None
    assert found.result == {"applied": "a"}
    [record] = s.inbox.quarantined()
    assert (record.command_id, record.reason) == ("a", QuarantineReason.PAYLOAD_MISMATCH)


def test_bt2_quarantine_survives_the_callers_rollback(setup: Setup) -> None:
    """The block fails: the fresh claims roll back with it (they are fresh
    again on redelivery), the mismatch's quarantine record stays."""
    s = setup
    _single(s, "m", {"v": 1})
    commands = [("m", {"v": 2}), ("x", {"v": 1})]
    with pytest.raises(RuntimeError, match="handler failed"), Session(s.engine) as session:
        with session.begin():
            with s.inbox.guard_batch(session, consumer="c", commands=commands) as batch:
                _apply_fresh(s, session, batch.fresh)
                raise RuntimeError("handler failed")
    assert s.inbox.lookup("c", "x") is None
    assert s.ledger_ids() == ["m"]
    assert [r.command_id for r in s.inbox.quarantined()] == ["m"]
    with Session(s.engine) as session, session.begin():
        with s.inbox.guard_batch(session, consumer="c", commands=commands) as batch:
            assert [e.outcome for e in batch] == ["refused", "fresh"]


def test_bt3_a_repeated_command_id_is_a_redelivery_of_its_first_entry(setup: Setup) -> None:
    """Inside one batch the same ID with the same payload is a duplicate of the
    first entry (its result is the first's), with another payload a
    quarantined mismatch; the command is applied once."""
    s = setup
    commands = [("r", {"v": 1}), ("r", {"v": 1}), ("r", {"v": 2}), ("q", {"v": 1})]
    with Session(s.engine) as session, session.begin():
        with s.inbox.guard_batch(session, consumer="c", commands=commands) as batch:
            assert [e.outcome for e in batch] == ["fresh", "duplicate", "refused", "fresh"]
            _apply_fresh(s, session, batch.fresh)
            assert batch[1].result == {"applied": "r"}
    assert s.ledger_ids() == ["q", "r"]
    [record] = s.inbox.quarantined()
    assert record.stored_digest == batch[0].digest
    assert record.incoming_digest == batch[2].digest


def test_bt4_an_empty_batch_runs_no_statement(setup: Setup) -> None:
    """No commands: an empty batch, and nothing sent to the database."""
    s = setup
    with Session(s.engine) as session, session.begin():
        session.connection()
        with StatementLog(s.engine) as log:
            with s.inbox.guard_batch(session, consumer="c", commands=[]) as batch:
                assert len(batch) == 0
                assert batch.fresh == []
        assert log.statements == []


def test_bt5_beyond_horizon_entries_are_refused_alone(setup: Setup) -> None:
    """A command sent before the horizon is quarantined and refused; the
    others of the batch are claimed as usual."""
    s = setup
    now = s.clock.now
    old = now - RETENTION - dt.timedelta(hours=1)
    commands = [
        BatchCommand("old", {"v": 1}, sent_at=old, details={"h": "x"}),
        BatchCommand("new", {"v": 1}, sent_at=now),
        BatchCommand("plain", {"v": 1}),
    ]
    with Session(s.engine) as session, session.begin():
        with s.inbox.guard_batch(session, consumer="c", commands=commands) as batch:
            assert [e.outcome for e in batch] == ["refused", "fresh", "fresh"]
            assert isinstance(batch[0].error, BeyondRetentionError)
            _apply_fresh(s, session, batch.fresh)
    assert s.inbox.lookup("c", "old") is None
    assert s.ledger_ids() == ["new", "plain"]
    [record] = s.inbox.quarantined()
    assert (record.command_id, record.reason) == ("old", QuarantineReason.BEYOND_RETENTION)
    assert record.details == {"h": "x"}


def test_bt6_results_in_one_statement_and_bad_results_roll_back(setup: Setup) -> None:
    """100 fresh entries: the claim and the results are one statement each on
    PostgreSQL and MariaDB (SQLite reads first: three); a duplicate's result
    cannot be replaced; an unencodable result refuses the batch at the exit."""
    s = setup
    commands = [(f"k{i:03}", {"i": i}) for i in range(100)]
    with Session(s.engine) as session, session.begin():
        session.connection()
        with StatementLog(s.engine) as log:
            with s.inbox.guard_batch(session, consumer="c", commands=commands) as batch:
                for entry in batch:
                    entry.result = entry.index
        expected = 3 if s.engine.dialect.name == "sqlite" else 2
        # and the guard's savepoint around the claim and the block, then its release
        # (SQLite's stdlib driver, outside a transaction: opened after the claim)
        assert sum(st.startswith("SAVEPOINT") for st in log.statements) == 1, log.statements
        assert log.statements[-1].startswith("RELEASE SAVEPOINT"), log.statements
        assert len(log.statements) == expected + 2, log.statements
    assert s.inbox.lookup("c", "k042").result == 42  # type: ignore[union-attr]
    with Session(s.engine) as session, session.begin():
        with s.inbox.guard_batch(session, consumer="c", commands=commands[:1]) as batch:
            with pytest.raises(AttributeError, match="only a fresh"):
                batch[0].result = "other"
    with pytest.raises(PayloadEncodingError, match=r"batch\[0\]\.result"):
        with Session(s.engine) as session, session.begin():
            with s.inbox.guard_batch(session, consumer="c", commands=[("z", {})]) as batch:
                batch[0].result = object()
    assert s.inbox.lookup("c", "z") is None


def test_bt6_batches_larger_than_a_statement_chunk(setup: Setup) -> None:
    """1,200 commands (more than one 500-key chunk on MariaDB and SQLite):
    every one claimed once, its result stored; then every one a duplicate."""
    s = setup
    commands = {f"big-{i}": {"i": i} for i in range(1200)}
    with Session(s.engine) as session, session.begin():
        with s.inbox.guard_batch(session, consumer="c", commands=commands) as batch:
            assert len(batch.fresh) == 1200
            for entry in batch:
                entry.result = entry.index
    with Session(s.engine) as session, session.begin():
        with s.inbox.guard_batch(session, consumer="c", commands=commands) as batch:
            assert len(batch.duplicates) == 1200
            assert [e.result for e in batch] == list(range(1200))
    with s.engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(s.inbox.tables.inbox)) == 1200


def test_bt13_a_released_entry_is_fresh_again(setup: Setup) -> None:
    """One command of the batch fails in a savepoint and is released: the
    others commit with their results, the released one leaves no evidence
    and no change, and its next delivery is fresh; only a fresh entry can be
    released."""
    s = setup
    _single(s, "done", {})
    commands = [("ok", {}), ("poison", {}), ("done", {})]
    with Session(s.engine) as session, session.begin():
        with s.inbox.guard_batch(session, consumer="c", commands=commands) as batch:
            for entry in batch.fresh:
                try:
                    with session.begin_nested():
                        apply(session.connection(), s.accounts, s.ledger, entry.command_id, 1)
                        entry.result = "applied"
                        if entry.command_id == "poison":
                            raise ValueError("cannot apply")
                except ValueError:
                    entry.release()
            with pytest.raises(AttributeError, match="only a fresh entry"):
                batch[2].release()
            assert [e.released for e in batch] == [False, True, False]
    assert s.ledger_ids() == ["done", "ok"]
    assert s.inbox.lookup("c", "poison") is None
    assert s.inbox.lookup("c", "ok").result == "applied"  # type: ignore[union-attr]
    with Session(s.engine) as session, session.begin():
        with s.inbox.guard_batch(session, consumer="c", commands=commands) as batch:
            assert [e.outcome for e in batch] == ["duplicate", "fresh", "duplicate"]
