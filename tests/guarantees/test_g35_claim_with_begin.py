"""G35-G36: on psycopg, the claim rides with the BEGIN and the guard's savepoint, the
result store with the release and the COMMIT.

One pipeline, one round trip: ``BEGIN``, ``SAVEPOINT``, the claim as a
prepared statement of inboxguard's own. Read off the wire (libpq's trace,
:mod:`tests.adapters.wire`); every check also asserts the rows.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import BeyondRetentionError, ConfigurationError, Inbox
from tests.adapters.wire import traced
from tests.helpers import apply, count, create_business

pytestmark = pytest.mark.postgresql

RETENTION = dt.timedelta(days=7)


def _deliver(box: Inbox, engine: Engine, tables: tuple, cid: str) -> bool:  # type: ignore[type-arg]
    accounts, ledger = tables
    with engine.connect() as conn, conn.begin():
        with box.guard(conn, consumer="c", command_id=cid, payload={"n": 1}) as e:
            if not e.duplicate:
                apply(conn, accounts, ledger, cid, 10)
    return not e.duplicate


def _balance(engine: Engine, tables: tuple) -> int:  # type: ignore[type-arg]
    accounts = tables[0]
    with engine.connect() as conn:
        return int(conn.execute(select(accounts.c.balance).where(accounts.c.id == 0)).scalar_one())


def _prepared(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        names = conn.exec_driver_sql("SELECT name FROM pg_prepared_statements").scalars().all()
        conn.commit()  # a ROLLBACK would make psycopg deallocate every prepared statement
    return sorted(str(name) for name in names if str(name).startswith("inboxguard_"))


def test_g35_the_claim_is_prepared_once_and_sent_with_the_begin(
    box: Inbox, one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    """The first delivery on a connection prepares the claim in the same
    pipeline; later ones only bind it. Each applies once."""
    engine = one_connection
    tables = create_business(engine, prefix)
    with traced(engine, tmp_path) as first:
        assert _deliver(box, engine, tables, "a")
    with traced(engine, tmp_path) as second:
        assert _deliver(box, engine, tables, "b")
    assert first.kinds(prefix, f"{prefix}ledger")[0] == "BEGIN + savepoint + claim"
    assert second.kinds(prefix, f"{prefix}ledger")[0] == "BEGIN + savepoint + claim"
    assert first.parsed_named("inboxguard_"), first.statements  # prepared in the pipeline
    assert not second.parsed_named("inboxguard_"), second.statements
    assert len(_prepared(engine)) == 1
    assert count(engine, tables[1]) == 2
    assert not _deliver(box, engine, tables, "a")
    assert _balance(engine, tables) == 20


def test_g35_psycopg_deallocating_its_statements_prepares_the_claim_again(
    box: Inbox, one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    """psycopg sends ``DEALLOCATE ALL`` after a rollback once it holds
    prepared statements of its own: the next claim is prepared again in its
    pipeline, still one round trip, and nothing fails."""
    engine = one_connection
    tables = create_business(engine, prefix)
    assert _deliver(box, engine, tables, "a")
    with engine.connect() as conn:
        driver = conn.connection.dbapi_connection
        for _ in range(6):  # past psycopg's prepare threshold: it prepares one of its own
            conn.exec_driver_sql("SELECT 1").all()
        conn.rollback()  # ROLLBACK, then psycopg's DEALLOCATE ALL
        assert driver is not None
        assert not driver._prepared._names  # type: ignore[attr-defined]
    assert _prepared(engine) == []
    with traced(engine, tmp_path) as wire:
        assert _deliver(box, engine, tables, "b")
    kinds = wire.kinds(prefix, f"{prefix}ledger")
    assert kinds[0] == "BEGIN + savepoint + claim", wire.statements
    assert "ROLLBACK" not in kinds, wire.statements
    assert wire.parsed_named("inboxguard_"), wire.statements
    assert count(engine, tables[1]) == 2


def test_g35_a_claim_the_server_forgot_is_rolled_back_and_sent_again(
    box: Inbox, one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    """``DEALLOCATE ALL`` sent past psycopg: the pipeline fails with 26000
    after only the BEGIN and the savepoint ran; it is rolled back, the server
    asked which of inboxguard's statements it still holds, and the pipeline
    sent again with the claim prepared anew. The command applies once."""
    engine = one_connection
    tables = create_business(engine, prefix)
    assert _deliver(box, engine, tables, "a")
    with engine.connect() as conn:
        conn.connection.dbapi_connection.pgconn.exec_(b"DEALLOCATE ALL")  # type: ignore[union-attr]
    with traced(engine, tmp_path) as wire:
        assert _deliver(box, engine, tables, "b")
    kinds = wire.kinds(prefix, f"{prefix}ledger")
    assert kinds[:2] == ["BEGIN + savepoint + claim", "ROLLBACK"], wire.statements
    # psycopg may follow its ROLLBACK with a DEALLOCATE ALL of its own; then
    # the guard asks the server which of its statements it still holds
    assert any(k.startswith("SELECT name FROM pg_prepared_statements") for k in kinds[2:4])
    rest = [k for k in kinds[2:] if not k.startswith(("DEALLOCATE ALL", "SELECT name FROM"))]
    assert rest[0] == "BEGIN + savepoint + claim", wire.statements
    assert rest.count("BEGIN + savepoint + claim") == 1, wire.statements
    assert count(engine, tables[1]) == 2
    assert _balance(engine, tables) == 20
    assert not _deliver(box, engine, tables, "b")


def test_g35_a_refusal_before_the_claim_sends_nothing(
    one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    """A message older than the evidence horizon is refused before the claim:
    the kept-back BEGIN and savepoint are dropped unsent, and the connection
    serves the next delivery as usual."""
    engine = one_connection
    box = Inbox(engine, retention=RETENTION, table_prefix=prefix)
    box.create_schema()
    try:
        tables = create_business(engine, prefix)
        old = dt.datetime.now(dt.UTC) - RETENTION * 3
        with traced(engine, tmp_path) as wire:
            with pytest.raises(BeyondRetentionError), Session(engine) as session:
                with (
                    session.begin(),
                    box.guard(session, consumer="c", command_id="old", payload={}, sent_at=old),
                ):
                    pytest.fail("a refused message ran")
        assert [s for s in wire.statements if "SAVEPOINT" in s or "claimed" in s] == []
        assert box.lookup("c", "old") is None
        assert _deliver(box, engine, tables, "new")
        assert count(engine, tables[1]) == 1
    finally:
        box.drop_schema()


# -- G36: the result store rides with the release and the COMMIT ------------------------


def _with_result(box: Inbox, engine: Engine, tables: tuple, cid: str, then: str = "") -> None:  # type: ignore[type-arg]
    accounts, ledger = tables
    with engine.connect() as conn, conn.begin():
        with box.guard(conn, consumer="c", command_id=cid, payload={"n": 1}) as e:
            apply(conn, accounts, ledger, cid, 10)
            e.result = {"applied": cid}
        if then == "write":
            conn.execute(ledger.insert().values(command_id=f"{cid} after", amount=0))
        elif then == "rollback":
            conn.rollback()


def _replayed(box: Inbox, engine: Engine, cid: str) -> object:
    with engine.connect() as conn, conn.begin():
        with box.guard(conn, consumer="c", command_id=cid, payload={"n": 1}) as e:
            assert e.duplicate
    return e.result


def test_g36_the_result_store_rides_with_the_commit(
    box: Inbox, one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    """A stored result costs no round trip of its own: its statement, the
    release and the COMMIT go as one pipeline, and a duplicate replays it."""
    engine = one_connection
    tables = create_business(engine, prefix)
    with traced(engine, tmp_path) as wire:
        _with_result(box, engine, tables, "a")
    kinds = wire.kinds(prefix, f"{prefix}ledger")
    assert kinds[0] == "BEGIN + savepoint + claim", wire.statements
    assert kinds[-1] == "result store + release + COMMIT", wire.statements
    assert len(kinds) == 4, wire.statements  # and the UPDATE and the INSERT of the body
    assert _replayed(box, engine, "a") == {"applied": "a"}
    assert count(engine, tables[1]) == 1


def test_g36_a_statement_after_the_block_sends_the_store_first(
    box: Inbox, one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    """The caller writes after the guarded block: the kept result store goes
    before that write (which might end the transaction), the release still
    with the COMMIT. Everything commits, the result replays."""
    engine = one_connection
    tables = create_business(engine, prefix)
    with traced(engine, tmp_path) as wire:
        _with_result(box, engine, tables, "a", then="write")
    kinds = wire.kinds(prefix, f"{prefix}ledger")
    assert kinds[-3:] == ["result store", "body INSERT", "release + COMMIT"], wire.statements
    assert _replayed(box, engine, "a") == {"applied": "a"}
    assert count(engine, tables[1]) == 2


def test_g36_a_rollback_after_the_block_drops_the_store(
    box: Inbox, one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    """The caller rolls back after the block: the kept store and release are
    never sent, nothing of the command commits, and its redelivery applies."""
    engine = one_connection
    tables = create_business(engine, prefix)
    with traced(engine, tmp_path) as wire:
        _with_result(box, engine, tables, "a", then="rollback")
    assert not any("result store" in k for k in wire.kinds(prefix, f"{prefix}ledger"))
    assert box.lookup("c", "a") is None
    assert count(engine, tables[1]) == 0
    _with_result(box, engine, tables, "a")
    assert _replayed(box, engine, "a") == {"applied": "a"}
    assert count(engine, tables[1]) == 1


def test_g36_a_store_whose_row_is_gone_fails_the_commit(
    box: Inbox, one_connection: Engine, prefix: str
) -> None:
    """The block deleted its own claim: the store kept for the COMMIT fails
    the server's check of one row, the COMMIT behind it never runs, and the
    commit raises the guard's error. Nothing commits."""
    engine = one_connection
    accounts, ledger = create_business(engine, prefix)
    with pytest.raises(ConfigurationError, match="matched 0 inbox rows"):
        with engine.connect() as conn, conn.begin():
            with box.guard(conn, consumer="c", command_id="gone", payload={}) as e:
                apply(conn, accounts, ledger, "gone", 10)
                conn.execute(box.tables.inbox.delete())
                e.result = {"ok": True}
    assert box.lookup("c", "gone") is None
    assert count(engine, ledger) == 0
    assert _balance(engine, (accounts, ledger)) == 0


def test_g35_prepared_statements_turned_off_keep_the_claim_apart(
    pg_url: str, prefix: str, tmp_path: Path
) -> None:
    """``prepare_threshold=None`` (a pooler that cannot keep prepared
    statements): nothing is prepared under inboxguard's names; the savepoint
    still goes with the BEGIN, the claim and the result store on their own."""
    engine = create_engine(
        pg_url, pool_size=1, max_overflow=0, connect_args={"prepare_threshold": None}
    )
    box = Inbox(engine, retention=RETENTION, table_prefix=prefix)
    box.create_schema()
    try:
        tables = create_business(engine, prefix)
        with traced(engine, tmp_path) as wire:
            _with_result(box, engine, tables, "a")
        kinds = wire.kinds(prefix, f"{prefix}ledger")
        assert kinds[:2] == ["BEGIN + savepoint", "claim"], wire.statements
        assert kinds[-2:] == ["result store", "release + COMMIT"], wire.statements
        assert _prepared(engine) == []
        assert _replayed(box, engine, "a") == {"applied": "a"}
    finally:
        box.drop_schema()
        engine.dispose()


def test_g36_a_store_the_server_forgot_fails_the_commit_and_nothing_commits(
    box: Inbox, one_connection: Engine, prefix: str
) -> None:
    """The result store's prepared statement deallocated behind psycopg's
    back: the pipeline at the commit fails (SQLSTATE 26000) before the
    release and the COMMIT, the transaction is rolled back and the commit
    raises, so nothing of the command commits; the next delivery prepares it
    again and applies once."""
    engine = one_connection
    tables = create_business(engine, prefix)
    _with_result(box, engine, tables, "warm")
    (store,) = [n for n in _prepared(engine) if n not in _claims(engine)]
    with engine.connect() as conn:
        conn.connection.dbapi_connection.pgconn.exec_(f"DEALLOCATE {store}".encode())  # type: ignore[union-attr]
    with pytest.raises(Exception, match="does not exist"):
        _with_result(box, engine, tables, "a")
    assert box.lookup("c", "a") is None
    assert count(engine, tables[1]) == 1
    _with_result(box, engine, tables, "a")
    assert _replayed(box, engine, "a") == {"applied": "a"}
    assert count(engine, tables[1]) == 2


def _claims(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT name FROM pg_prepared_statements WHERE statement LIKE 'WITH claimed%%'"
        ).scalars()
        names = [str(name) for name in rows]
        conn.commit()
    return names


def test_g35_an_interrupted_pipeline_leaves_no_connection_behind_it(
    box: Inbox, one_connection: Engine, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delivery interrupted while the claim's pipeline waits for its replies
    (a KeyboardInterrupt, a worker's shutdown): the connection cannot leave
    pipeline mode with replies unread, so it is closed; the pool replaces it,
    nothing of the command committed, and the redelivery applies once."""
    engine = one_connection
    tables = create_business(engine, prefix)
    assert _deliver(box, engine, tables, "warm")
    with engine.connect() as conn:
        driver = conn.connection.dbapi_connection
    calls = {"n": 0}
    wait = type(driver).wait

    def interrupted(self: object, gen: object, *args: object, **kwargs: object) -> object:
        calls["n"] += 1
        if calls["n"] == 2:  # the sent pipeline, then the first wait for its replies
            raise KeyboardInterrupt
        return wait(self, gen, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(type(driver), "wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _deliver(box, engine, tables, "a")
    monkeypatch.undo()
    assert driver is not None
    assert driver.pgconn.status != 0 or driver.closed  # CONNECTION_OK is 0: closed
    assert _deliver(box, engine, tables, "a")
    assert count(engine, tables[1]) == 2
    assert not _deliver(box, engine, tables, "a")
