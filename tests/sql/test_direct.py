"""The claim on the caller's DBAPI cursor: taken only when nothing would notice,
and indistinguishable from SQLAlchemy's own execution in every outcome."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Connection, create_engine, event, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import inboxguard
from inboxguard.sql.direct import DirectSelect, Rows, execute
from tests.conftest import unique

CONSUMER = "billing"


@pytest.fixture
def pg(pg_url: str) -> Iterator[Engine]:
    engine = create_engine(pg_url, pool_size=4)
    yield engine
    engine.dispose()


@pytest.fixture
def box(pg: Engine) -> Iterator[inboxguard.Inbox]:
    inbox = inboxguard.Inbox(pg, retention=dt.timedelta(days=1), table_prefix=unique("dr_"))
    inbox.create_schema()
    yield inbox
    inbox.drop_schema()


def _claim(box: inboxguard.Inbox, conn: Connection) -> DirectSelect:
    statement = box._flows.dialect(conn.dialect)._claim_stmt
    assert isinstance(statement, DirectSelect)
    return statement


def _params(command_id: str) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC)
    return {
        "consumer": CONSUMER,
        "command_id": command_id,
        "digest": "d" * 64,
        "processed_at": now,
        "expires_at": now + dt.timedelta(days=1),
        "result_expires_at": None,
    }


def test_plain_psycopg_engine_runs_the_claim_on_the_cursor(
    box: inboxguard.Inbox, pg: Engine
) -> None:
    """No listener, no tenant map, no logging: the claim skips SQLAlchemy's
    execution, and its row converts as SQLAlchemy would (aware UTC, bool)."""
    with pg.connect() as conn, conn.begin():
        result = execute(conn, _claim(box, conn), _params("c-1"))
        assert isinstance(result, Rows)
        assert result.first() == ("d" * 64, None, None, True)
    with pg.connect() as conn, conn.begin():
        row = execute(conn, _claim(box, conn), _params("c-1")).first()
        assert row is not None
        assert row[3] is False
        assert row[0] == "d" * 64


@pytest.mark.parametrize(
    "observer",
    ["before_cursor_execute", "after_cursor_execute", "before_execute", "handle_error", "echo"],
)
def test_anything_watching_statements_gets_sqlalchemys_execution(
    box: inboxguard.Inbox, pg_url: str, observer: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A tracer, an error hook or statement logging sees the claim: it then goes
    through ``Connection.execute``, and the tracer records its SQL."""
    engine = create_engine(pg_url, echo=observer == "echo")
    seen: list[str] = []
    if observer in {"before_cursor_execute", "after_cursor_execute"}:
        event.listen(engine, observer, lambda _c, _cur, sql, *_a: seen.append(sql))
    elif observer == "before_execute":
        event.listen(engine, observer, lambda _c, clause, *_a: seen.append(str(clause)))
    elif observer == "handle_error":
        event.listen(engine, observer, lambda _ctx: None)
    try:
        with caplog.at_level(logging.INFO, "sqlalchemy.engine"), engine.connect() as conn:
            with conn.begin():
                result = execute(conn, _claim(box, conn), _params("c-watch"))
                assert not isinstance(result, Rows)
                assert result.first() is not None
        if observer in {"before_cursor_execute", "after_cursor_execute", "before_execute"}:
            assert any("ON CONFLICT" in sql for sql in seen)
        if observer == "echo":
            assert any("ON CONFLICT" in r.getMessage() for r in caplog.records)
    finally:
        engine.dispose()


def test_a_tenant_schema_map_gets_sqlalchemys_execution(box: inboxguard.Inbox, pg: Engine) -> None:
    """``schema_translate_map`` is rendered by SQLAlchemy; the claim never bypasses it."""
    with pg.connect() as conn:
        tenant = conn.execution_options(schema_translate_map={None: "public"})
        with tenant.begin():
            result = execute(tenant, _claim(box, tenant), _params("c-tenant"))
            assert not isinstance(result, Rows)


def test_outcomes_are_the_same_on_both_paths(box: inboxguard.Inbox, pg_url: str) -> None:
    """Fresh, duplicate with its stored result, and mismatch: the same entries,
    the same stored row, the same quarantine, whichever path ran the claim."""
    traced = create_engine(pg_url)
    event.listen(traced, "before_cursor_execute", lambda *_a: None)
    plain = box.engine
    outcomes: dict[str, list[Any]] = {}
    try:
        for label, engine in (("direct", plain), ("sqlalchemy", traced)):
            got: list[Any] = []
            cid = f"same-{label}"
            with engine.begin() as conn:
                with box.guard(conn, consumer=CONSUMER, command_id=cid, payload={"a": 1}) as e:
                    got.append(e.duplicate)
                    e.result = {"ok": True}
            with engine.begin() as conn:
                with box.guard(conn, consumer=CONSUMER, command_id=cid, payload={"a": 1}) as e:
                    got.extend([e.duplicate, e.result])
            with pytest.raises(inboxguard.PayloadMismatchError):
                with engine.begin() as conn:
                    with box.guard(conn, consumer=CONSUMER, command_id=cid, payload={"a": 2}):
                        pytest.fail("a mismatch never runs the block")
            with engine.connect() as conn:
                stored = conn.execute(
                    text(
                        f"SELECT expires_at - processed_at FROM {box.table_prefix}inbox"
                        " WHERE command_id = :c"
                    ),
                    {"c": cid},
                ).scalar_one()
                got.append(stored)
            got.append(sorted(r.reason for r in box.quarantined() if r.command_id == cid))
            outcomes[label] = got
    finally:
        traced.dispose()
    assert outcomes["direct"] == outcomes["sqlalchemy"]
    assert outcomes["direct"][:3] == [False, True, {"ok": True}]


def _fail_a_flush(session: Session, table: str) -> None:
    """Flush a row whose key is taken: the Session rolls its transaction back."""

    class Base(DeclarativeBase):
        pass

    class One(Base):
        __tablename__ = table
        id: Mapped[int] = mapped_column(primary_key=True)

    session.add(One(id=1))
    with contextlib.suppress(IntegrityError):
        session.flush()


def _fail_a_statement(conn: Session | Connection, table: str) -> None:
    """Run an INSERT whose key is taken: the database aborts the transaction."""
    with contextlib.suppress(IntegrityError):
        conn.execute(text(f"INSERT INTO {table} VALUES (1)"))


@pytest.mark.parametrize(
    ("caller", "failure", "expected"),
    [
        ("session", "flush", inboxguard.ConfigurationError),
        ("session", "statement", inboxguard.ConfigurationError),
        ("connection", "statement", inboxguard.ConfigurationError),
    ],
)
def test_a_statement_failed_inside_the_block_ends_the_same_on_both_paths(
    box: inboxguard.Inbox, pg_url: str, caller: str, failure: str, expected: type[Exception]
) -> None:
    """A block that swallows a failed statement and assigns a result. After a
    failed flush the Session has rolled its transaction back; after a failed
    statement psycopg reports the transaction aborted: the boundary error
    either way, raised before the result store is sent. Both paths raise the
    same, and no evidence is stored."""
    traced = create_engine(pg_url)
    event.listen(traced, "before_cursor_execute", lambda *_a: None)
    table = f"{box.table_prefix}one"
    with box.engine.begin() as conn:
        conn.execute(text(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY)"))
        conn.execute(text(f"INSERT INTO {table} VALUES (1)"))
    raised: dict[str, type[BaseException]] = {}
    try:
        for label, engine in (("direct", box.engine), ("sqlalchemy", traced)):
            cid = f"failed-{caller}-{failure}-{label}"
            with pytest.raises(Exception) as caught:  # noqa: PT011 (compared below)
                opened = Session(engine) if caller == "session" else engine.connect()
                with opened as conn, conn.begin():
                    with box.guard(conn, consumer=CONSUMER, command_id=cid, payload={}) as e:
                        if failure == "flush":
                            assert isinstance(conn, Session)
                            _fail_a_flush(conn, table)
                        else:
                            _fail_a_statement(conn, table)
                        e.result = {"ok": True}
            raised[label] = type(caught.value)
            assert box.lookup(CONSUMER, cid) is None
    finally:
        traced.dispose()
        with box.engine.begin() as conn:
            conn.execute(text(f"DROP TABLE {table}"))
    assert raised == {"direct": expected, "sqlalchemy": expected}


def test_a_lost_connection_is_invalidated_and_raised_as_sqlalchemy_would(
    box: inboxguard.Inbox, pg: Engine, pg_url: str
) -> None:
    """The caller's backend killed before the claim: the guard raises SQLAlchemy's
    OperationalError marked as a disconnect, the block never runs, the
    connection is invalidated (the pool replaces it) and nothing is recorded."""
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    try:
        with pg.connect() as conn:
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            conn.commit()
            with admin.connect() as other:
                other.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
            with pytest.raises(OperationalError) as raised:
                with conn.begin():
                    with box.guard(conn, consumer=CONSUMER, command_id="c-lost", payload={}):
                        pytest.fail("the block never runs without a claim")
            assert raised.value.connection_invalidated
            assert conn.invalidated
        with pg.connect() as conn:
            rows = conn.execute(text(f"SELECT count(*) FROM {box.table_prefix}inbox")).scalar()
            assert rows == 0
    finally:
        admin.dispose()


def test_a_held_claim_times_out_as_in_progress_and_restores_lock_timeout(
    pg: Engine, pg_url: str
) -> None:
    """A second worker on a claim held by an open transaction waits at most
    ``lock_timeout`` on the direct path, raises InProgressError, and its
    transaction keeps its own lock_timeout afterwards."""
    inbox = inboxguard.Inbox(
        pg,
        retention=dt.timedelta(days=1),
        table_prefix=unique("drl_"),
        lock_timeout=dt.timedelta(milliseconds=200),
    )
    inbox.create_schema()
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with pg.begin() as conn:
            with inbox.guard(conn, consumer=CONSUMER, command_id="c-held", payload={}):
                held.set()
                release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(10)
        with pg.connect() as conn, conn.begin():
            conn.execute(text("SET LOCAL lock_timeout = '7s'"))
            with pytest.raises(inboxguard.InProgressError):
                with inbox.guard(conn, consumer=CONSUMER, command_id="c-held", payload={}):
                    pytest.fail("a held claim never runs the block")
        with pg.connect() as conn, conn.begin():
            conn.execute(text("SET LOCAL lock_timeout = '7s'"))
            with inbox.guard(conn, consumer=CONSUMER, command_id="c-other", payload={}):
                assert conn.execute(text("SHOW lock_timeout")).scalar() == "7s"
    finally:
        release.set()
        thread.join(10)
        inbox.drop_schema()
