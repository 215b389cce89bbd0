"""G32-G33: on psycopg, the guard's savepoint rides with the BEGIN and the
claim, its release with the COMMIT, and the exit is still checked by the
database.

Read off the wire (libpq's trace, :mod:`tests.adapters.wire`): one entry a
round trip, statements sent as one query or one pipeline joined by ``" + "``. Each check of
G33 also asserts the rows and the redelivery.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Table, event, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import ConfigurationError, Inbox
from tests.adapters.wire import traced
from tests.helpers import apply, count, create_business

pytestmark = pytest.mark.postgresql

RETENTION = dt.timedelta(days=7)


def _balance(engine: Engine, accounts: Table) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(accounts.c.balance).where(accounts.c.id == 0)).scalar_one())


def _deliver(inbox: Inbox, engine: Engine, tables: Any, cid: str, kind: str = "connection") -> bool:
    """One delivery that behaves; True when it applied."""
    accounts, ledger = tables
    if kind == "session":
        with Session(engine) as session, session.begin():
            with inbox.guard(session, consumer="c", command_id=cid, payload={"n": 1}) as e:
                if not e.duplicate:
                    apply(session.connection(), accounts, ledger, cid, 10)
        return not e.duplicate
    with engine.connect() as conn, conn.begin():
        with inbox.guard(conn, consumer="c", command_id=cid, payload={"n": 1}) as e:
            if not e.duplicate:
                apply(conn, accounts, ledger, cid, 10)
    return not e.duplicate


def _driver(conn: Connection) -> Any:
    return conn.connection.dbapi_connection


@pytest.mark.parametrize("kind", ["connection", "session"])
def test_g32_the_savepoint_costs_no_round_trip_of_its_own(
    box: Inbox, one_connection: Engine, prefix: str, tmp_path: Path, kind: str
) -> None:
    """A fresh delivery sends the BEGIN with the savepoint and the release
    with the COMMIT: as many round trips as the claim alone would cost; a
    duplicate the same, without the body."""
    engine = one_connection
    tables = create_business(engine, prefix)
    _deliver(box, engine, tables, "warm", kind)
    with traced(engine, tmp_path) as fresh:
        assert _deliver(box, engine, tables, "a", kind)
    with traced(engine, tmp_path) as again:
        assert not _deliver(box, engine, tables, "a", kind)
    body = [f"UPDATE {prefix}accounts", "body INSERT"]
    kinds = fresh.kinds(prefix, f"{prefix}ledger")
    assert kinds[0] == "BEGIN + savepoint + claim", fresh.statements
    assert [k.split(" SET ")[0] for k in kinds[1:3]] == body, fresh.statements
    assert kinds[3:] == ["release + COMMIT"], fresh.statements
    assert again.kinds(prefix, f"{prefix}ledger") == [
        "BEGIN + savepoint + claim",
        "release + COMMIT",
    ], again.statements
    assert _balance(engine, tables[0]) == 20


def test_g32_a_statement_listener_sees_every_statement_sent_alone(
    box: Inbox, one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    """With a SQLAlchemy statement listener on the engine (a tracer, a
    logger), the savepoint and the release are sent as SQLAlchemy sends them,
    so the listener sees each; the delivery applies once all the same."""
    engine = one_connection
    tables = create_business(engine, prefix)
    seen: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    with traced(engine, tmp_path) as wire:
        assert _deliver(box, engine, tables, "a")
    kinds = wire.kinds(prefix, f"{prefix}ledger")
    assert kinds[:3] == ["BEGIN", "savepoint", "claim"], wire.statements
    assert kinds[-2:] == ["release", "COMMIT"], wire.statements
    assert any(s.startswith("SAVEPOINT") for s in seen)
    assert any(s.startswith("RELEASE SAVEPOINT") for s in seen)
    assert not _deliver(box, engine, tables, "a")


def test_g32_work_before_the_guard_and_a_second_guard(
    box: Inbox, one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    """The caller wrote before the guard: psycopg's own BEGIN went with that
    write, so the savepoint goes alone. A second guard in the same
    transaction sends the first one's release before its own savepoint, and
    its own release with the COMMIT. Both commands apply, once."""
    engine = one_connection
    accounts, ledger = create_business(engine, prefix)
    with traced(engine, tmp_path) as wire, engine.connect() as conn, conn.begin():
        conn.execute(ledger.insert().values(command_id="caller's own", amount=0))
        for cid in ("a", "b"):
            with box.guard(conn, consumer="c", command_id=cid, payload={"n": 1}) as e:
                assert not e.duplicate
                apply(conn, accounts, ledger, cid, 10)
    kinds = wire.kinds(prefix, f"{prefix}ledger")
    assert kinds[:4] == ["BEGIN", "body INSERT", "savepoint", "claim"], wire.statements
    assert "release" in kinds[4:-1], wire.statements
    assert kinds[-1] == "release + COMMIT", wire.statements
    assert count(engine, ledger) == 3
    assert _balance(engine, accounts) == 20
    assert not _deliver(box, engine, (accounts, ledger), "a")
    assert not _deliver(box, engine, (accounts, ledger), "b")


@pytest.mark.parametrize("kind", ["connection", "session"])
def test_g33_a_transaction_replaced_inside_the_block_fails_the_commit(
    box: Inbox, one_connection: Engine, prefix: str, kind: str
) -> None:
    """Inside the block the handler rolls back on the driver and writes
    through a raw driver cursor: psycopg begins a new transaction, which no
    SQLAlchemy event sees. At the exit the server reports a healthy
    transaction, but psycopg began one inside the block, so the guard
    releases its savepoint there and then: the release fails and the guard
    raises. Nothing commits; the redelivery applies once."""
    engine = one_connection
    accounts, ledger = create_business(engine, prefix)
    statement = f"INSERT INTO {prefix}ledger (command_id, amount) VALUES ('raw', 1)"
    with pytest.raises(ConfigurationError, match="inside the guarded block"):
        with Session(engine) as session, session.begin():
            target: Any = session if kind == "session" else session.connection()
            with box.guard(target, consumer="c", command_id="r", payload={"n": 1}):
                dbapi = _driver(session.connection())
                dbapi.rollback()
                with dbapi.cursor() as cur:
                    cur.execute(statement)
    assert box.lookup("c", "r") is None
    assert count(engine, ledger) == 0
    assert _deliver(box, engine, (accounts, ledger), "r")
    assert not _deliver(box, engine, (accounts, ledger), "r")
    assert _balance(engine, accounts) == 10


def test_g33_a_release_kept_for_the_commit_fails_it_when_the_savepoint_is_gone(
    box: Inbox, one_connection: Engine, prefix: str
) -> None:
    """The release kept back for the COMMIT is the database's word: when the
    guard's savepoint is gone by the time the caller commits (here a
    ``RELEASE`` sent through the raw driver after the block, then a write),
    the commit fails with the guard's error, the server never runs the
    ``COMMIT``, and nothing of the transaction is kept."""
    engine = one_connection
    accounts, ledger = create_business(engine, prefix)
    with pytest.raises(ConfigurationError, match="inside the guarded block"):
        with engine.connect() as conn, conn.begin():
            with box.guard(conn, consumer="c", command_id="k", payload={"n": 1}):
                apply(conn, accounts, ledger, "k", 10)
            with _driver(conn).cursor() as cur:
                cur.execute("RELEASE SAVEPOINT sa_savepoint_1")
                cur.execute(f"INSERT INTO {prefix}ledger (command_id, amount) VALUES ('late', 1)")
    assert box.lookup("c", "k") is None
    assert count(engine, ledger) == 0
    assert _deliver(box, engine, (accounts, ledger), "k")
    assert _balance(engine, accounts) == 10


def test_g33_every_route_after_the_block_settles_the_kept_release(
    box: Inbox, one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    """After the block, the kept-back release goes with the driver's own
    ``commit()``; a rollback drops it (nothing commits, and the next
    transaction on the same connection starts clean); a ``COMMIT`` statement
    ends the transaction with it; more work after the block commits with the
    rest. Every applied command applies once."""
    engine = one_connection
    accounts, ledger = create_business(engine, prefix)
    tables = (accounts, ledger)
    with traced(engine, tmp_path) as wire, engine.connect() as conn:
        conn.begin()
        with box.guard(conn, consumer="c", command_id="driver", payload={"n": 1}):
            apply(conn, accounts, ledger, "driver", 10)
        _driver(conn).commit()  # behind SQLAlchemy's back, outside the block
        conn.rollback()  # SQLAlchemy's bookkeeping catches up; nothing left to roll back
    assert wire.kinds(prefix, f"{prefix}ledger")[-1] == "release + COMMIT", wire.statements
    with engine.connect() as conn, conn.begin() as tx:
        with box.guard(conn, consumer="c", command_id="rolled", payload={"n": 1}):
            apply(conn, accounts, ledger, "rolled", 10)
        tx.rollback()
    with engine.connect() as conn, conn.begin():
        with box.guard(conn, consumer="c", command_id="statement", payload={"n": 1}):
            apply(conn, accounts, ledger, "statement", 10)
        conn.exec_driver_sql("COMMIT")
    with engine.connect() as conn, conn.begin():
        with box.guard(conn, consumer="c", command_id="more", payload={"n": 1}):
            apply(conn, accounts, ledger, "more", 10)
        conn.execute(ledger.insert().values(command_id="after the block", amount=0))
    assert box.lookup("c", "rolled") is None
    assert {cid: box.lookup("c", cid) is not None for cid in ("driver", "statement", "more")} == {
        "driver": True,
        "statement": True,
        "more": True,
    }
    assert count(engine, ledger) == 4
    assert _balance(engine, accounts) == 30
    assert _deliver(box, engine, tables, "rolled")
    assert not any(_deliver(box, engine, tables, cid) for cid in ("driver", "statement", "more"))
    assert _balance(engine, accounts) == 40


def test_g32_a_dialect_listener_turns_the_sharing_off(
    box: Inbox, one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    """A listener of the dialect's ``do_execute`` (instrumentation that wraps
    every statement the driver runs) sees the savepoint and its release: they
    are sent as SQLAlchemy sends them, not past it."""
    engine = one_connection
    tables = create_business(engine, prefix)
    seen: list[str] = []

    def record(cursor: Any, statement: str, parameters: Any, context: Any) -> None:
        seen.append(statement)

    event.listen(engine, "do_execute", record)
    with traced(engine, tmp_path) as wire:
        assert _deliver(box, engine, tables, "a")
    kinds = wire.kinds(prefix, f"{prefix}ledger")
    assert kinds[:3] == ["BEGIN", "savepoint", "claim"], wire.statements
    assert kinds[-2:] == ["release", "COMMIT"], wire.statements
    assert any(s.startswith("SAVEPOINT") for s in seen)
    assert any(s.startswith("RELEASE SAVEPOINT") for s in seen)


def test_g32_the_shared_begin_keeps_the_isolation_level(
    box: Inbox, one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    """A connection set to SERIALIZABLE (SQLAlchemy's ``isolation_level``) gets
    the guard's savepoint with psycopg's own ``BEGIN ISOLATION LEVEL
    SERIALIZABLE``: the block runs at the level the caller chose."""
    engine = one_connection
    accounts, ledger = create_business(engine, prefix)
    with traced(engine, tmp_path) as wire:
        with engine.connect() as base:
            conn = base.execution_options(isolation_level="SERIALIZABLE")
            with conn.begin():
                with box.guard(conn, consumer="c", command_id="s", payload={"n": 1}):
                    level = conn.exec_driver_sql("SHOW transaction_isolation").scalar()
                    apply(conn, accounts, ledger, "s", 10)
    assert level == "serializable"
    assert wire.statements[0].startswith(
        "BEGIN ISOLATION LEVEL SERIALIZABLE; SAVEPOINT sa_savepoint_1; WITH claimed AS"
    ), wire.statements
    assert _balance(engine, accounts) == 10


def test_g33_a_two_phase_transaction_releases_at_the_exit(
    box: Inbox, one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    """In a two-phase transaction (``begin_twophase()``) the commit is a
    ``PREPARE TRANSACTION`` and a ``COMMIT PREPARED`` that could not carry the
    release, so the guard releases its savepoint at the exit, where the
    database still checks it."""
    engine = one_connection
    accounts, ledger = create_business(engine, prefix)
    with traced(engine, tmp_path) as wire, engine.connect() as conn:
        twophase = conn.begin_twophase()
        with box.guard(conn, consumer="c", command_id="2pc", payload={"n": 1}):
            apply(conn, accounts, ledger, "2pc", 10)
        twophase.rollback()
    kinds = wire.kinds(prefix, f"{prefix}ledger")
    assert "release" in kinds, wire.statements
    assert not any("release + COMMIT" in k for k in kinds), wire.statements
    assert box.lookup("c", "2pc") is None
    assert count(engine, ledger) == 0
