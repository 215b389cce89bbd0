"""G35: on psycopg, the claim rides with the BEGIN and the guard's savepoint.

One pipeline, one round trip: ``BEGIN``, ``SAVEPOINT``, the claim as a
prepared statement of inboxguard's own. Read off the wire (libpq's trace,
:mod:`tests.adapters.wire`); every check also asserts the rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import BeyondRetentionError, Inbox
from tests.adapters.wire import traced
from tests.helpers import apply, count, create_business

pytestmark = pytest.mark.postgresql

RETENTION = dt.timedelta(days=7)


@pytest.fixture
def box(one_connection: Engine, prefix: str) -> Iterator[Inbox]:
    inbox = Inbox(one_connection, retention=RETENTION, table_prefix=prefix)
    inbox.create_schema()
    yield inbox
    inbox.drop_schema()


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
    after only the BEGIN and the savepoint ran; it is rolled back and sent
    again with the claim prepared anew. The command applies once."""
    engine = one_connection
    tables = create_business(engine, prefix)
    assert _deliver(box, engine, tables, "a")
    with engine.connect() as conn:
        conn.connection.dbapi_connection.pgconn.exec_(b"DEALLOCATE ALL")  # type: ignore[union-attr]
    with traced(engine, tmp_path) as wire:
        assert _deliver(box, engine, tables, "b")
    kinds = wire.kinds(prefix, f"{prefix}ledger")
    assert kinds[:2] == ["BEGIN + savepoint + claim", "ROLLBACK"], wire.statements
    # psycopg may follow its ROLLBACK with a DEALLOCATE ALL of its own
    rest = [k for k in kinds[2:] if k != "DEALLOCATE ALL"]
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
