"""G10: the transaction at the block's exit is the one the claim was made in.

A commit or rollback inside the guarded block would commit the claim early
(a later failure leaves the command marked done: lost) or drop it (the rest
of the block commits without evidence: applied twice on redelivery). The
guard sees it when the block ends and raises ``ConfigurationError`` before
anything else can commit; savepoints inside the block stay allowed.
"""

from __future__ import annotations

import pytest
from sqlalchemy import delete, insert
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from inboxguard import ConfigurationError, Inbox
from tests.helpers import apply, count, create_business

MISTAKE = "committed or rolled back inside the guarded block"


def test_g10_rollback_after_integrity_error_is_refused(inbox: Inbox, engine: Engine) -> None:
    """The common "catch IntegrityError, session.rollback(), carry on" drops the
    claim; the guard refuses at the block's exit and nothing commits: no
    evidence, none of the writes made after the rollback."""
    accounts, ledger = create_business(engine, inbox.table_prefix)
    with pytest.raises(ConfigurationError, match=MISTAKE), Session(engine) as session:
        with session.begin():
            with inbox.guard(session, consumer="c", command_id="dup", payload={}):
                try:
                    session.execute(insert(accounts).values(id=0, balance=1))
                except IntegrityError:
                    session.rollback()
                apply(session.connection(), accounts, ledger, "dup", 5)
    assert inbox.lookup("c", "dup") is None
    assert count(engine, ledger) == 0
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="dup", payload={}) as entry:
            assert not entry.duplicate


def test_g10_commit_inside_the_block_is_refused(inbox: Inbox, engine: Engine) -> None:
    """``session.commit()`` inside the block is named; what the block wrote
    after it never commits."""
    accounts, ledger = create_business(engine, inbox.table_prefix)
    with pytest.raises(ConfigurationError, match=MISTAKE), Session(engine) as session:
        with inbox.guard(session, consumer="c", command_id="early", payload={}):
            session.commit()
            apply(session.connection(), accounts, ledger, "early", 5)
        session.commit()  # never reached: the guard raised first
    assert count(engine, ledger) == 0


def test_g10_commit_then_failure_names_the_mistake(inbox: Inbox, engine: Engine) -> None:
    """A block that commits and then fails: the commit is refused before it
    runs (named, chained under the exit's error), so the claim never commits
    alone and the command is not lost."""
    with pytest.raises(ConfigurationError, match=MISTAKE) as raised, Session(engine) as session:
        with inbox.guard(session, consumer="c", command_id="lost", payload={}):
            session.commit()
            raise RuntimeError("handler failed")
    assert isinstance(raised.value.__cause__, ConfigurationError)
    assert "refused session.commit()" in str(raised.value.__cause__)
    assert inbox.lookup("c", "lost") is None


@pytest.mark.parametrize("end", ["commit", "rollback"])
def test_g10_connection_commit_or_rollback_is_refused(
    inbox: Inbox, engine: Engine, end: str
) -> None:
    """``conn.commit()`` and ``conn.rollback()`` on a Core Connection are refused
    the same way; the result is never stored on a new transaction."""
    with engine.connect() as conn, pytest.raises(ConfigurationError, match=MISTAKE):
        with inbox.guard(conn, consumer="c", command_id=f"conn-{end}", payload={}) as entry:
            getattr(conn, end)()
            entry.result = {"stored": True}
    if end == "rollback":
        assert inbox.lookup("c", f"conn-{end}") is None


def test_g10_savepoints_inside_the_block_are_allowed(inbox: Inbox, engine: Engine) -> None:
    """A step that may fail goes in ``begin_nested()``: its savepoint rolls
    back alone and the block carries on; a released savepoint is fine too.
    The evidence, the result and the other writes commit together."""
    accounts, ledger = create_business(engine, inbox.table_prefix)
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="sp", payload={}) as entry:
            try:
                with session.begin_nested():
                    session.execute(insert(accounts).values(id=0, balance=1))
            except IntegrityError:
                pass
            with session.begin_nested():
                apply(session.connection(), accounts, ledger, "sp", 5)
            entry.result = {"ok": True}
    record = inbox.lookup("c", "sp")
    assert record is not None
    assert record.result == {"ok": True}
    assert count(engine, ledger) == 1


def test_g10_rolling_back_the_savepoint_of_the_claim_is_refused(
    inbox: Inbox, engine: Engine
) -> None:
    """A claim made inside the caller's savepoint is gone when the block rolls
    that savepoint back; the guard refuses."""
    with Session(engine) as session, session.begin():
        outer = session.begin_nested()
        # Caught by SQLAlchemy's bookkeeping or, where that cannot see the
        # guard's own savepoint go, by the database refusing its release.
        with pytest.raises(ConfigurationError, match=f"{MISTAKE}|ended inside the guarded block"):
            with inbox.guard(session, consumer="c", command_id="sp-claim", payload={}):
                outer.rollback()
    assert inbox.lookup("c", "sp-claim") is None


def test_g10_result_update_matching_no_row_is_an_error(inbox: Inbox, engine: Engine) -> None:
    """Storing the result must update the claimed row; when the block deleted
    it, the guard raises instead of committing a command without evidence."""
    with pytest.raises(ConfigurationError, match="matched 0 inbox rows"):
        with Session(engine) as session, session.begin():
            with inbox.guard(session, consumer="c", command_id="gone", payload={}) as entry:
                session.execute(delete(inbox.tables.inbox))
                entry.result = {"ok": True}
    assert inbox.lookup("c", "gone") is None
