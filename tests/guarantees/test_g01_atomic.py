"""G1: the inbox row commits if and only if the caller's transaction commits."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import Inbox
from tests.helpers import apply, count, create_business


def test_g01_commit_records_evidence_with_the_mutation(inbox: Inbox, engine: Engine) -> None:
    """A committed block leaves both the business change and the evidence."""
    accounts, ledger = create_business(engine, inbox.table_prefix)
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="cmd-1", payload={"a": 5}) as entry:
            assert not entry.duplicate
            apply(session.connection(), accounts, ledger, "cmd-1", 5)
    assert count(engine, ledger) == 1
    record = inbox.lookup("c", "cmd-1")
    assert record is not None
    assert record.digest == entry.digest


def test_g01_exception_in_block_leaves_no_evidence(inbox: Inbox, engine: Engine) -> None:
    """A failing handler rolls back the claim with its changes; the next
    delivery processes the command again."""
    accounts, ledger = create_business(engine, inbox.table_prefix)
    with pytest.raises(RuntimeError), Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="cmd-1", payload={"a": 5}):
            apply(session.connection(), accounts, ledger, "cmd-1", 5)
            raise RuntimeError("handler failed")
    assert inbox.lookup("c", "cmd-1") is None
    assert count(engine, ledger) == 0
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="cmd-1", payload={"a": 5}) as entry:
            assert not entry.duplicate
            apply(session.connection(), accounts, ledger, "cmd-1", 5)
    assert count(engine, ledger) == 1


def test_g01_caller_rollback_discards_the_claim(inbox: Inbox, engine: Engine) -> None:
    """A rollback after the block exits normally discards the evidence too."""
    with Session(engine) as session:
        with inbox.guard(session, consumer="c", command_id="cmd-2", payload={}) as entry:
            entry.result = {"done": True}
        session.rollback()
    assert inbox.lookup("c", "cmd-2") is None


def test_g01_works_on_a_plain_connection(inbox: Inbox, engine: Engine) -> None:
    """A Core Connection's transaction is honoured like a Session's."""
    accounts, ledger = create_business(engine, inbox.table_prefix)
    with engine.connect() as conn:
        with conn.begin():
            with inbox.guard(conn, consumer="c", command_id="k", payload=[1]) as entry:
                apply(conn, accounts, ledger, "k", 1)
                entry.result = "ok"
        with conn.begin():
            with inbox.guard(conn, consumer="c", command_id="k", payload=[1]) as again:
                assert again.duplicate
                assert again.result == "ok"
    assert count(engine, ledger) == 1


def test_g01_guard_never_commits_for_the_caller(inbox: Inbox, engine: Engine) -> None:
    """Leaving the block does not commit: the caller still owns the transaction."""
    with Session(engine) as session:
        with inbox.guard(session, consumer="c", command_id="open", payload={}):
            pass
        assert session.in_transaction()
        session.rollback()
    assert inbox.lookup("c", "open") is None
