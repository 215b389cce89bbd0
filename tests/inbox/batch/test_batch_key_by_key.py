"""BT16: the key-by-key batch claim (MySQL, MariaDB before 10.5) on the real
MariaDB, against the one-statement claim it stands in for.

SQLAlchemy decides ``insert_returning`` on the first connection from the
server's version (MariaDB 10.5+ only); the batch claim follows that flag. An
engine whose dialect reports ``insert_returning = False`` is therefore what
the claim sees on a server without ``INSERT ... RETURNING``; its statements
still run on the MariaDB service.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import inboxguard
from inboxguard import InProgressError, PayloadMismatchError, QuarantineReason
from tests.conftest import FakeClock
from tests.helpers import apply, create_business
from tests.inbox.batch.conftest import RETENTION, Setup, StatementLog


def _mariadb_setup(url: str, prefix: str, *, returning: bool) -> Setup:
    engine = create_engine(url)
    with engine.connect():
        pass  # the first connection: SQLAlchemy reads the server's version
    assert engine.dialect.is_mariadb
    assert engine.dialect.insert_returning  # MariaDB 10.11 here
    if not returning:
        engine.dialect.insert_returning = False  # as SQLAlchemy decides before 10.5
    clock = FakeClock()
    box = inboxguard.Inbox(
        engine,
        retention=RETENTION,
        table_prefix=prefix,
        lock_timeout=dt.timedelta(milliseconds=300),
        clock=clock,
    )
    box.create_schema()
    accounts, ledger = create_business(engine, prefix)
    return Setup(box, engine, accounts, ledger, clock)


def _teardown(s: Setup) -> None:
    s.accounts.metadata.drop_all(s.engine)
    s.inbox.drop_schema()
    s.engine.dispose()


@pytest.fixture
def key_by_key(mysql_url: str, prefix: str) -> Iterator[Setup]:
    """A MariaDB inbox whose engine reports no ``INSERT ... RETURNING``."""
    s = _mariadb_setup(mysql_url, prefix, returning=False)
    yield s
    _teardown(s)


@pytest.fixture
def one_statement(mysql_url: str, prefix: str) -> Iterator[Setup]:
    """The same inbox on an engine that has it (tables of their own)."""
    s = _mariadb_setup(mysql_url, prefix + "r_", returning=True)
    yield s
    _teardown(s)


def _single(s: Setup, command_id: str, payload: object) -> None:
    with Session(s.engine) as session, session.begin():
        with s.inbox.guard(session, consumer="c", command_id=command_id, payload=payload) as e:
            apply(session.connection(), s.accounts, s.ledger, command_id, 1)
            e.result = {"applied": command_id}


def _scenario(s: Setup) -> dict[str, Any]:
    """Two stored commands, then a batch with a fresh, a duplicate, a
    mismatch, a repeated ID and another fresh command, delivered twice.
    Returns what a user sees: entries, business rows, inbox rows,
    quarantine records."""
    _single(s, "a", {"n": 1})
    _single(s, "b", {"n": 2})
    commands = [
        ("d", {"n": 4}),
        ("a", {"n": 1}),
        ("b", {"n": 99}),
        ("d", {"n": 4}),
        ("c", {"n": 3}),
    ]
    seen: dict[str, Any] = {"rounds": []}
    for _ in range(2):
        with Session(s.engine) as session, session.begin():
            with s.inbox.guard_batch(session, consumer="c", commands=commands) as batch:
                for entry in batch.fresh:
                    apply(session.connection(), s.accounts, s.ledger, entry.command_id, 1)
                    entry.result = {"applied": entry.command_id}
        seen["rounds"].append(
            [(e.command_id, e.outcome, e.result, type(e.error).__name__) for e in batch]
        )
    seen["ledger"] = s.ledger_ids()
    seen["inbox"] = {
        cid: found.result
        for cid in ("a", "b", "c", "d")
        if (found := s.inbox.lookup("c", cid)) is not None
    }
    seen["quarantine"] = [(r.command_id, r.reason, r.occurrences) for r in s.inbox.quarantined()]
    return seen


def test_bt15_key_by_key_claims_each_command_and_quarantines_the_mismatch(
    key_by_key: Setup,
) -> None:
    """Without ``INSERT ... RETURNING`` the batch claims command by command:
    fresh entries commit with their results, a duplicate gets the stored
    result, the mismatch is quarantined without failing the others, and a
    redelivery of the whole batch finds every committed command."""
    s = key_by_key
    seen = _scenario(s)
    applied = {cid: {"applied": cid} for cid in "abcd"}
    first, second = seen["rounds"]
    assert first == [
        ("d", "fresh", applied["d"], "NoneType"),
        ("a", "duplicate", applied["a"], "NoneType"),
        ("b", "refused", None, PayloadMismatchError.__name__),
        ("d", "duplicate", applied["d"], "NoneType"),
        ("c", "fresh", applied["c"], "NoneType"),
    ]
    assert [e[1] for e in second] == ["duplicate", "duplicate", "refused", "duplicate", "duplicate"]
    assert [e[2] for e in second] == [applied["d"], applied["a"], None, applied["d"], applied["c"]]
    assert seen["ledger"] == ["a", "b", "c", "d"]
    assert seen["inbox"] == applied
    assert seen["quarantine"] == [("b", QuarantineReason.PAYLOAD_MISMATCH, 2)]


def test_bt15_key_by_key_decides_as_the_one_statement_claim(
    key_by_key: Setup, one_statement: Setup
) -> None:
    """The same deliveries on both claims: the same entries, rows and
    quarantine records."""
    assert _scenario(key_by_key) == _scenario(one_statement)


def test_bt15_key_by_key_runs_one_insert_per_command(
    key_by_key: Setup, one_statement: Setup
) -> None:
    """The path taken is visible in the statements: one ``INSERT IGNORE``
    per command and no ``RETURNING`` key by key; one statement for the whole
    batch with it."""
    commands = [(f"k{i}", {"i": i}) for i in range(5)]
    logs = {}
    for name, s in (("key_by_key", key_by_key), ("one_statement", one_statement)):
        with Session(s.engine) as session, session.begin():
            session.connection()
            with StatementLog(s.engine) as log:
                with s.inbox.guard_batch(session, consumer="c", commands=commands) as batch:
                    assert len(batch.fresh) == 5
                    claims = [st for st in log.statements if "SAVEPOINT" not in st]
                    assert log.statements[0].startswith("SAVEPOINT")  # the guard's, first
        logs[name] = claims
    inserts = [st for st in logs["key_by_key"] if "INSERT IGNORE" in st]
    assert len(inserts) == 5, logs["key_by_key"]
    assert not any("RETURNING" in st for st in logs["key_by_key"])
    assert len(logs["one_statement"]) == 1
    assert "RETURNING" in logs["one_statement"][0]


def test_bt15_key_by_key_lock_timeout_refuses_the_whole_batch(key_by_key: Setup) -> None:
    """A command held by another open transaction: the single claim's
    bounded wait refuses the whole batch (retryable), the command claimed
    before it rolls back with it."""
    s = key_by_key
    commands = [("free", {}), ("held", {})]
    with Session(s.engine) as holder:
        with s.inbox.guard(holder, consumer="c", command_id="held", payload={}):
            pass
        started = time.monotonic()
        with pytest.raises(InProgressError) as raised, Session(s.engine) as session:
            with s.inbox.guard_batch(session, consumer="c", commands=commands):
                pytest.fail("the block must not run")
        assert raised.value.retryable
        assert time.monotonic() - started < 4
        holder.rollback()
    assert s.inbox.lookup("c", "free") is None
    with Session(s.engine) as session, session.begin():
        with s.inbox.guard_batch(session, consumer="c", commands=commands) as batch:
            assert [e.outcome for e in batch] == ["fresh", "fresh"]
