"""G17-G21: the guard owns the part of the caller's transaction that holds its claim.

Each test runs a handler the way real code goes wrong (an error the caller
catches outside the block, a commit by some route, a transaction ended behind
SQLAlchemy's back, a deadlock retried inside the block, a session split over
two engines), then redelivers the command with a handler that behaves, and
asserts what a user cares about: the evidence committed exactly when the
block's changes did, and the command was applied once.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Connection, Table, create_engine, event, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from inboxguard import ConfigurationError, Inbox
from tests.helpers import apply, count, create_business, wait_until


def _balance(engine: Engine, accounts: Table) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(accounts.c.balance).where(accounts.c.id == 0)).scalar_one())


def _redeliver(inbox: Inbox, engine: Engine, accounts: Table, ledger: Table, cid: str) -> bool:
    """Deliver ``cid`` again with a handler that behaves; True when it applied."""
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id=cid, payload={"n": 1}) as entry:
            if entry.duplicate:
                return False
            apply(session.connection(), accounts, ledger, cid, 10)
    return True


@pytest.mark.parametrize("kind", ["session", "connection"])
def test_g17_error_caught_outside_the_block_leaves_nothing(
    inbox: Inbox, engine: Engine, kind: str
) -> None:
    """The block writes, then raises; the caller catches the error outside the
    block (a loop that logs and goes on) and commits its transaction. Neither
    the claim nor the block's write commits; the caller's own write does; the
    redelivery applies the command once."""
    accounts, ledger = create_business(engine, inbox.table_prefix)
    with Session(engine) as session, session.begin():
        target: Session | Connection = session if kind == "session" else session.connection()
        session.execute(ledger.insert().values(command_id="caller's own", amount=0))
        try:
            with inbox.guard(target, consumer="c", command_id="e1", payload={"n": 1}):
                apply(session.connection(), accounts, ledger, "e1", 10)
                raise RuntimeError("handler failed")
        except RuntimeError:
            pass  # logged; the caller goes on and commits
    assert inbox.lookup("c", "e1") is None
    assert count(engine, ledger) == 1  # the caller's own row only
    assert _balance(engine, accounts) == 0
    assert _redeliver(inbox, engine, accounts, ledger, "e1")
    assert not _redeliver(inbox, engine, accounts, ledger, "e1")
    assert _balance(engine, accounts) == 10


def test_g17_a_decorated_handler_that_fails_leaves_nothing(inbox: Inbox, engine: Engine) -> None:
    """``Inbox.handler``: the decorated function writes, then raises; the caller
    catches the error and commits. No claim and no write; the retry applies."""
    accounts, ledger = create_business(engine, inbox.table_prefix)
    fail = [True]

    @inbox.handler(consumer="c", command_id="cid")
    def charge(session: Session, cid: str) -> str:
        apply(session.connection(), accounts, ledger, cid, 10)
        if fail[0]:
            raise RuntimeError("handler failed")
        return cid

    with Session(engine) as session, session.begin():
        with pytest.raises(RuntimeError):
            charge(session, "h1")
    assert inbox.lookup("c", "h1") is None
    assert count(engine, ledger) == 0
    fail[0] = False
    with Session(engine) as session, session.begin():
        assert charge(session, "h1") == "h1"
    with Session(engine) as session, session.begin():
        assert charge(session, "h1") == "h1"  # a duplicate: not applied again
    assert _balance(engine, accounts) == 10


def test_g17_orm_objects_added_in_the_block_are_forgotten(inbox: Inbox, engine: Engine) -> None:
    """An ORM object the block added but never flushed is not flushed by the
    caller's later commit: the session forgets it with the savepoint."""

    class Base(DeclarativeBase):
        pass

    class Note(Base):
        __tablename__ = f"{inbox.table_prefix}notes"
        id: Mapped[int] = mapped_column(primary_key=True)

    Base.metadata.create_all(engine)
    with Session(engine) as session, session.begin():
        try:
            with inbox.guard(session, consumer="c", command_id="orm", payload={}):
                session.add(Note(id=1))
                raise RuntimeError("handler failed")
        except RuntimeError:
            pass
    with Session(engine) as session:
        assert session.scalar(select(Note)) is None
    assert inbox.lookup("c", "orm") is None


def test_g17_after_commit_hooks_run_after_the_real_commit(inbox: Inbox, engine: Engine) -> None:
    """The guard's savepoint is the connection's, not the session's: an
    application's ``after_commit`` hook (publish an event, send an email) runs
    once, after the caller's COMMIT, when another connection sees the changes,
    never at the guard's release of its savepoint."""
    accounts, ledger = create_business(engine, inbox.table_prefix)
    seen: list[bool] = []
    with Session(engine) as session:
        event.listen(
            session, "after_commit", lambda _: seen.append(inbox.lookup("c", "hook") is not None)
        )
        with session.begin():
            with inbox.guard(session, consumer="c", command_id="hook", payload={"n": 1}):
                apply(session.connection(), accounts, ledger, "hook", 10)
            assert seen == []  # released, not committed: no hook yet
    assert seen == [True]
    assert _balance(engine, accounts) == 10


def _commit_routes(dialect: str) -> dict[str, Callable[[Session], Any]]:
    routes: dict[str, Callable[[Session], Any]] = {
        "session.commit()": lambda s: s.commit(),
        "connection.commit()": lambda s: s.connection().commit(),
        "COMMIT": lambda s: s.execute(text("COMMIT")),
        "driver commit()": lambda s: s.connection().connection.dbapi_connection.commit(),  # type: ignore[union-attr]
    }
    if dialect == "postgresql":
        routes["multi-statement COMMIT"] = lambda s: s.connection().exec_driver_sql(
            "SELECT 1; COMMIT"
        )
    if dialect != "mysql":
        routes["END"] = lambda s: s.execute(text("END"))
    if dialect == "mysql":
        routes["CREATE TABLE"] = lambda s: s.execute(text("CREATE TABLE ig_implicit (x INT)"))
        routes["TRUNCATE"] = lambda s: s.execute(text("TRUNCATE TABLE ig_implicit_none"))
        routes["START TRANSACTION"] = lambda s: s.execute(text("START TRANSACTION"))
        routes["SET autocommit=1"] = lambda s: s.execute(text("SET autocommit = 1"))
    return routes


@pytest.mark.parametrize(
    "route",
    [
        "session.commit()",
        "connection.commit()",
        "COMMIT",
        "driver commit()",
        "multi-statement COMMIT",
        "END",
        "CREATE TABLE",
        "TRUNCATE",
        "START TRANSACTION",
        "SET autocommit=1",
    ],
)
def test_g18_a_commit_inside_the_block_is_refused_before_it_runs(
    inbox: Inbox, engine: Engine, route: str
) -> None:
    """The handler applies half of the command, commits by ``route``, catches
    the refusal and carries on with the other half. The commit never ran: the
    block fails at its exit, nothing commits (not the claim, not either half),
    and the redelivery applies the whole command once."""
    routes = _commit_routes(engine.dialect.name)
    if route not in routes:
        pytest.skip(f"{route} ends no transaction on {engine.dialect.name}")
    accounts, ledger = create_business(engine, inbox.table_prefix)
    with pytest.raises(ConfigurationError, match="inside the guarded block"):
        with Session(engine) as session, session.begin():
            with inbox.guard(session, consumer="c", command_id="cm", payload={"n": 1}):
                session.execute(ledger.insert().values(command_id="cm", amount=10))
                with pytest.raises((ConfigurationError, sqlite3.DatabaseError)):
                    routes[route](session)  # sqlite3's own commit() fails "not authorized"
                session.execute(accounts.update().where(accounts.c.id == 0).values(balance=10))
    assert inbox.lookup("c", "cm") is None
    assert count(engine, ledger) == 0
    assert _balance(engine, accounts) == 0
    assert _redeliver(inbox, engine, accounts, ledger, "cm")
    assert count(engine, ledger) == 1
    assert _balance(engine, accounts) == 10


def test_g18_savepoints_and_temporary_tables_stay_allowed(inbox: Inbox, engine: Engine) -> None:
    """What does not end the transaction is not refused: a released and a
    rolled-back savepoint of the block's own, and (MariaDB) a temporary table."""
    accounts, ledger = create_business(engine, inbox.table_prefix)
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="ok", payload={}):
            with session.begin_nested():
                apply(session.connection(), accounts, ledger, "ok", 10)
            sp = session.begin_nested()
            session.execute(ledger.insert().values(command_id="undone", amount=1))
            sp.rollback()
            if engine.dialect.name == "mysql":
                session.execute(text("CREATE TEMPORARY TABLE ig_tmp (x INT)"))
                session.execute(text("DROP TEMPORARY TABLE ig_tmp"))
    assert inbox.lookup("c", "ok") is not None
    assert count(engine, ledger) == 1


@pytest.mark.parametrize("verb", ["ROLLBACK TO SAVEPOINT", "RELEASE SAVEPOINT"])
def test_g23_the_guards_savepoint_cannot_be_ended_by_hand(
    inbox: Inbox, engine: Engine, verb: str
) -> None:
    """A hand-written ``ROLLBACK TO`` (which would drop the claim and keep the
    transaction) or ``RELEASE`` of the guard's own savepoint is refused before
    it runs; nothing of the block commits."""
    accounts, ledger = create_business(engine, inbox.table_prefix)
    with pytest.raises(ConfigurationError, match="inside the guarded block"):
        with Session(engine) as session, session.begin():
            with inbox.guard(session, consumer="c", command_id="own", payload={}):
                name = session.connection().get_nested_transaction()._savepoint  # type: ignore[union-attr]
                with pytest.raises(ConfigurationError, match="the guard's savepoint"):
                    session.execute(text(f"{verb} {name}"))
                apply(session.connection(), accounts, ledger, "own", 10)
    assert inbox.lookup("c", "own") is None
    assert count(engine, ledger) == 0


def test_g19_a_transaction_ended_behind_sqlalchemy_is_caught_at_the_exit(
    inbox: Inbox, engine: Engine
) -> None:
    """The handler rolls back on the driver connection itself (SQLAlchemy sees
    nothing), then writes again. Where the driver reports its transaction
    state in process (sqlite3, psycopg, asyncpg) the write is refused before
    it runs; elsewhere (PyMySQL) the release of the guard's savepoint fails,
    the database's word. Either way the guard raises ConfigurationError and
    rolls back: the late write never commits, and the redelivery applies the
    command once."""
    accounts, ledger = create_business(engine, inbox.table_prefix)
    with pytest.raises(ConfigurationError, match="inside the guarded block"):
        with Session(engine) as session, session.begin():
            with inbox.guard(session, consumer="c", command_id="rb", payload={"n": 1}):
                session.connection().connection.dbapi_connection.rollback()  # type: ignore[union-attr]
                apply(session.connection(), accounts, ledger, "rb", 10)
    assert inbox.lookup("c", "rb") is None
    assert count(engine, ledger) == 0
    assert _redeliver(inbox, engine, accounts, ledger, "rb")
    assert _balance(engine, accounts) == 10


@pytest.mark.parametrize("result", [None, {"ok": True}])
@pytest.mark.parametrize("kind", ["session", "connection"])
def test_g19_a_database_error_caught_inside_the_block(
    inbox: Inbox, engine: Engine, kind: str, result: dict[str, bool] | None
) -> None:
    """The handler writes, runs a statement that fails, catches its error and
    returns (with a result to store, or none). PostgreSQL has aborted the
    transaction: the guard raises ConfigurationError at the exit, before its
    result store, and rolls back, so nothing commits and the redelivery
    applies once. The other databases undo the failed statement alone, so
    the block's write and the claim commit together and the redelivery is a
    duplicate."""
    accounts, ledger = create_business(engine, inbox.table_prefix)
    aborts = engine.dialect.name == "postgresql"

    def deliver() -> None:
        with Session(engine) as session, session.begin():
            target: Session | Connection = session if kind == "session" else session.connection()
            with inbox.guard(target, consumer="c", command_id="ce", payload={"n": 1}) as entry:
                apply(session.connection(), accounts, ledger, "ce", 10)
                with contextlib.suppress(DBAPIError):  # the mistake under test
                    session.connection().execute(text("SELECT * FROM no_such_table_g19"))
                entry.result = result

    if aborts:
        with pytest.raises(ConfigurationError, match="caught inside the block"):
            deliver()
        assert inbox.lookup("c", "ce") is None
        assert count(engine, ledger) == 0
        assert _redeliver(inbox, engine, accounts, ledger, "ce")
    else:
        deliver()
        assert not _redeliver(inbox, engine, accounts, ledger, "ce")
    assert count(engine, ledger) == 1
    assert _balance(engine, accounts) == 10


@pytest.mark.parametrize("kind", ["session", "connection"])
def test_g19_a_database_error_caught_in_a_savepoint_of_its_own_is_accepted(
    inbox: Inbox, engine: Engine, kind: str
) -> None:
    """The safe form of the mistake above: the statement that may fail runs in
    ``begin_nested()``, whose rollback undoes the failure alone. The guard
    accepts it on every database: the block's write, its result and the claim
    commit together, and the redelivery is a duplicate that returns the result."""
    accounts, ledger = create_business(engine, inbox.table_prefix)
    with Session(engine) as session, session.begin():
        target: Session | Connection = session if kind == "session" else session.connection()
        with inbox.guard(target, consumer="c", command_id="sp", payload={"n": 1}) as entry:
            apply(session.connection(), accounts, ledger, "sp", 10)
            conn = session.connection()
            nested = conn.begin_nested()
            try:
                conn.execute(text("SELECT * FROM no_such_table_g19"))
            except DBAPIError:
                nested.rollback()
            entry.result = {"ok": True}
    assert not _redeliver(inbox, engine, accounts, ledger, "sp")
    stored = inbox.lookup("c", "sp")
    assert stored is not None
    assert stored.result == {"ok": True}
    assert count(engine, ledger) == 1
    assert _balance(engine, accounts) == 10


def test_g20_mariadb_deadlock_retried_inside_the_block(mysql_url: str, prefix: str) -> None:
    """InnoDB resolves a deadlock by rolling back the victim's whole transaction,
    claim included (error 1213). A handler that catches it and retries the
    statement carries on in a new transaction; the guard's exit sees that the
    savepoint is gone, raises, and nothing of the block commits. The
    redelivery applies the command once: balance 11, not 21."""
    import datetime as dt

    from sqlalchemy.exc import OperationalError

    engine = create_engine(mysql_url)
    inbox = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    accounts, ledger = create_business(engine, prefix, accounts_count=2)
    with engine.begin() as conn:
        conn.execute(accounts.update().where(accounts.c.id == 0).values(balance=1))
    other_has_row1 = threading.Event()
    other_done = threading.Event()

    def other() -> None:  # the heavier transaction: InnoDB picks the guard's as victim
        with engine.begin() as conn:
            conn.execute(ledger.insert(), [{"command_id": f"w{i}", "amount": 0} for i in range(50)])
            conn.execute(accounts.update().where(accounts.c.id == 1).values(balance=5))
            other_has_row1.set()
            conn.execute(accounts.update().where(accounts.c.id == 0).values(balance=100))
            conn.rollback()
        other_done.set()

    thread = threading.Thread(target=other)
    with pytest.raises(ConfigurationError, match="no longer knows the guard's savepoint"):
        with Session(engine) as session, session.begin():
            with inbox.guard(session, consumer="c", command_id="dl", payload={}):
                add = accounts.update().where(accounts.c.id == 0)
                session.execute(add.values(balance=accounts.c.balance + 10))
                thread.start()
                assert other_has_row1.wait(30)
                wait_until(lambda: _lock_waits(engine) > 0)
                with pytest.raises(OperationalError, match="1213"):
                    session.execute(accounts.update().where(accounts.c.id == 1).values(balance=7))
                session.execute(add.values(balance=accounts.c.balance + 10))  # the "retry"
    thread.join(30)
    assert other_done.is_set()
    assert inbox.lookup("c", "dl") is None
    assert _balance(engine, accounts) == 1
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="dl", payload={}) as entry:
            assert not entry.duplicate
            session.execute(
                accounts.update().where(accounts.c.id == 0).values(balance=accounts.c.balance + 10)
            )
    assert _balance(engine, accounts) == 11
    engine.dispose()


def _lock_waits(engine: Engine) -> int:
    with engine.connect() as conn:
        found = conn.execute(
            text("SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'")
        ).scalar_one()
        return int(found)


def test_g21_a_session_split_over_two_engines_is_refused(
    inbox: Inbox, engine: Engine, tmp_path: Any
) -> None:
    """``Session(bind=A, binds={ledger: B})`` commits one transaction per
    engine, one after the other: the guard refuses it before any claim,
    naming the fix."""
    accounts, ledger = create_business(engine, inbox.table_prefix)
    other = create_engine(f"sqlite:///{tmp_path}/other.db")
    with Session(bind=engine, binds={ledger: other}) as session:
        with pytest.raises(ConfigurationError, match="Put the inbox tables on the handler's"):
            with inbox.guard(session, consumer="c", command_id="split", payload={}):
                pass  # pragma: no cover - refused before the block
    assert inbox.lookup("c", "split") is None
    with Session(bind=engine, binds={ledger: engine}) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="one", payload={}):
            apply(session.connection(), accounts, ledger, "one", 1)
    assert inbox.lookup("c", "one") is not None
    other.dispose()


def test_g17_a_caller_that_goes_on_after_a_failed_block_keeps_only_its_own_changes(
    inbox: Inbox, engine: Engine
) -> None:
    """An object the block changed and one it flushed are undone; the caller,
    having caught the error, changes the object again and commits: only the
    caller's change commits, no evidence, one after-commit hook. On the stdlib
    SQLite driver with nothing written before the block, the whole transaction
    was the guard's, so going on is refused loudly instead."""

    class Base(DeclarativeBase):
        pass

    class Acct(Base):
        __tablename__ = f"{inbox.table_prefix}acct"
        id: Mapped[int] = mapped_column(primary_key=True)
        bal: Mapped[int]

    Base.metadata.create_all(engine)
    with Session(engine) as session, session.begin():
        session.add(Acct(id=1, bal=0))
    hooks: list[int] = []
    with Session(engine) as session:
        event.listen(session, "after_commit", lambda _: hooks.append(1))
        with session.begin():
            account = session.get(Acct, 1)
            assert account is not None
            try:
                with inbox.guard(session, consumer="c", command_id="go-on", payload={}):
                    account.bal += 10
                    session.add(Acct(id=2, bal=5))
                    session.flush()
                    raise RuntimeError("handler failed")
            except RuntimeError:
                pass
            if engine.dialect.name == "sqlite":
                with pytest.raises(Exception, match="closed transaction"):
                    account.bal += 1
                return
            account.bal += 1
    with Session(engine) as session:
        assert [(a.id, a.bal) for a in session.scalars(select(Acct))] == [(1, 1)]
    assert inbox.lookup("c", "go-on") is None
    assert hooks == [1]
