"""One suite, run once per database: each database's statements against the real server.

The ``backend`` fixture runs every test on SQLite, PostgreSQL and MariaDB in
turn, with the statements :func:`database_for` picks for that engine. A new
database passes when this suite passes on it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Engine

from inboxguard.sql.dialects import Claim, Database, database_for, drive
from inboxguard.sql.tables import InboxTables, OutboxTables, inbox_tables, outbox_tables

NOW = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)
DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64
#: The database each engine fixture's parameter must map to.
EXPECTED = {"sqlite": "SQLite", "postgresql": "PostgreSQL", "mysql": "MariaDB/MySQL"}


@dataclass(frozen=True)
class Backend:
    """One database under test: its engine, its statements and fresh tables."""

    engine: Engine
    database: Database
    inbox: InboxTables
    outbox: OutboxTables


@pytest.fixture
def backend(engine: Engine, prefix: str, request: pytest.FixtureRequest) -> Iterator[Backend]:
    """Each supported database in turn, with tables of this test's own."""
    database = database_for(engine.dialect)
    assert database.label == EXPECTED[request.node.callspec.params["db_url"]]
    tables = [inbox_tables(prefix), outbox_tables(prefix)]
    for t in tables:
        t.metadata.create_all(engine)
    yield Backend(engine, database, *tables)
    for t in tables:
        t.metadata.drop_all(engine)


def _claim_params(command_id: str, digest: str, at: dt.datetime = NOW) -> dict[str, Any]:
    return {
        "consumer": "billing",
        "command_id": command_id,
        "digest": digest,
        "processed_at": at,
        "expires_at": at + 10 * DAY,
        "result_expires_at": None,
    }


def _claim(backend: Backend, params: dict[str, Any]) -> Claim:
    dialect = backend.database.inbox.for_dialect(
        backend.engine.dialect, backend.inbox, dt.timedelta(seconds=5)
    )
    with backend.engine.begin() as conn:
        return drive(conn, dialect.claim(params))


# -- inbox: claim, result store, quarantine upsert ---------------------------------------


def test_claim_fresh_then_duplicate_returns_the_stored_digest(backend: Backend) -> None:
    """The first claim inserts the evidence; a second sees the stored digest, not its own."""
    first = _claim(backend, _claim_params("inv-1", DIGEST_A))
    assert first == Claim(fresh=True, stored_digest=DIGEST_A)

    again = _claim(backend, _claim_params("inv-1", DIGEST_B))
    assert again.fresh is False
    assert again.stored_digest == DIGEST_A
    assert again.result_json is None
    with backend.engine.connect() as conn:
        rows = conn.execute(select(backend.inbox.inbox.c.digest)).scalars().all()
    assert rows == [DIGEST_A]


def test_stored_result_comes_back_with_the_duplicate(backend: Backend) -> None:
    """The result store writes the fresh command's result; a duplicate claim returns it."""
    _claim(backend, _claim_params("inv-2", DIGEST_A))
    dialect = backend.database.inbox.for_dialect(backend.engine.dialect, backend.inbox, None)
    with backend.engine.begin() as conn:
        stored = conn.execute(
            dialect.store_result_stmt,
            {"key_consumer": "billing", "key_command_id": "inv-2", "new_result": '{"ok":1}'},
        )
        assert stored.rowcount == 1
    duplicate = _claim(backend, _claim_params("inv-2", DIGEST_A))
    assert duplicate == Claim(False, DIGEST_A, '{"ok":1}', None)


def _quarantine_values(incoming: str, at: dt.datetime, details: str) -> dict[str, Any]:
    return {
        "consumer": "billing",
        "command_id": "inv-9",
        "reason": "payload_mismatch",
        "incoming_digest": incoming,
        "stored_digest": DIGEST_A,
        "first_seen_at": at,
        "last_seen_at": at,
        "occurrences": 1,
        "status": "open",
        "details": details,
    }


def test_quarantine_upsert_inserts_then_counts_a_repeat(backend: Backend) -> None:
    """A repeat of the same refusal counts one more occurrence and reopens the record."""
    q = backend.inbox.quarantine
    upsert = backend.database.inbox(backend.inbox, None).upsert_quarantine()
    with backend.engine.begin() as conn:
        conn.execute(upsert, _quarantine_values(DIGEST_B, NOW, '"first"'))
        conn.execute(update(q).values(status="resolved"))
    later = NOW + DAY
    with backend.engine.begin() as conn:
        conn.execute(upsert, _quarantine_values(DIGEST_B, later, '"second"'))
        conn.execute(upsert, _quarantine_values(DIGEST_A, later, '"other digest"'))
    with backend.engine.connect() as conn:
        rows = conn.execute(select(q).order_by(q.c.id)).mappings().all()
    assert len(rows) == 2
    repeat, other = rows
    assert (repeat["occurrences"], repeat["status"], repeat["details"]) == (2, "open", '"second"')
    assert (repeat["first_seen_at"], repeat["last_seen_at"]) == (NOW, later)
    assert (other["incoming_digest"], other["occurrences"]) == (DIGEST_A, 1)


# -- purge ---------------------------------------------------------------------------------


def _seed(backend: Backend, ids: list[str], expires_at: dt.datetime) -> None:
    rows = [{**_claim_params(i, DIGEST_A), "expires_at": expires_at, "result": '"r"'} for i in ids]
    with backend.engine.begin() as conn:
        conn.execute(insert(backend.inbox.inbox), rows)


def test_purge_deletes_only_expired_rows_in_batches(backend: Backend) -> None:
    """Batches of at most n rows; a row expiring after ``now`` is never deleted."""
    expired = [f"old-{i}" for i in range(5)]
    alive = [f"new-{i}" for i in range(3)]
    _seed(backend, expired, NOW - DAY)
    _seed(backend, alive, NOW + dt.timedelta(seconds=1))
    sql = backend.database.purge(backend.inbox)
    counts = []
    with backend.engine.connect() as conn:
        if sql.isolation_level is not None:
            conn.execution_options(isolation_level=sql.isolation_level)
        for _ in range(4):
            with conn.begin():
                counts.append(sql.delete_expired(conn, NOW, 2))
        assert sql.count(conn, NOW, None) == [0, 0, 0]
        conn.commit()
    assert counts == [2, 2, 1, 0]
    with backend.engine.connect() as conn:
        left = set(conn.execute(select(backend.inbox.inbox.c.command_id)).scalars())
    assert left == set(alive)


def test_purge_lock_admits_one_purger(backend: Backend) -> None:
    """Where the database has a single-purger lock, a second taker is refused at once;
    SQLite (one writer at a time) says it has none and refuses to pretend."""
    sql = backend.database.purge(backend.inbox)
    if not sql.single_purger:
        assert backend.database.label == "SQLite"
        with backend.engine.connect() as conn, pytest.raises(NotImplementedError):
            sql.try_lock(conn)
        return
    with backend.engine.connect() as first, backend.engine.connect() as second:
        assert sql.try_lock(first)
        assert not sql.try_lock(second)
        sql.unlock(first)
        assert sql.try_lock(second)
        sql.unlock(second)


# -- watermark -----------------------------------------------------------------------------


def test_watermark_advances_only_upwards(backend: Backend) -> None:
    """A new key and a higher position advance; an equal or lower one does not."""
    statements = backend.database.watermark(backend.inbox.watermark)
    results = []
    for position in (202610, 202611, 202611, 202609, 202612):
        values = {"consumer": "billing", "key": "cust-1", "position": position, "updated_at": NOW}
        with backend.engine.begin() as conn:
            results.append(drive(conn, statements.advance(values)))
    assert results == [True, True, False, False, True]
    w = backend.inbox.watermark.c
    with backend.engine.connect() as conn:
        assert conn.execute(select(w.key, w.position)).all() == [("cust-1", 202612)]


# -- outbox --------------------------------------------------------------------------------


def _outbox_row(command_id: str, digest: str = DIGEST_A) -> dict[str, Any]:
    return {
        "command_id": command_id,
        "destination": "orders",
        "payload": "{}",
        "headers": None,
        "digest": digest,
        "created_at": NOW,
        "due_at": NOW,
        "attempts": 0,
    }


def test_outbox_insert_once_then_compare_digests(backend: Backend) -> None:
    """An ID is inserted once; a second insert is a no-op and the stored digest is readable."""
    st = backend.database.outbox(backend.outbox)
    with backend.engine.begin() as conn:
        assert st.add_row(conn, _outbox_row("ship-1"))
        assert not st.add_row(conn, _outbox_row("ship-1", DIGEST_B))
        stored = conn.execute(st.lookup_for_compare(), {"b_command_id": "ship-1"}).scalar_one()
        assert stored == DIGEST_A
        assert conn.execute(select(func.count()).select_from(st.table)).scalar_one() == 1


def _claim_due(backend: Backend, now: dt.datetime, token: str) -> list[tuple[Any, ...]]:
    st = backend.database.outbox(backend.outbox)
    with backend.engine.connect() as conn:
        if st.claim_isolation_level is not None:
            conn = conn.execution_options(isolation_level=st.claim_isolation_level)  # noqa: PLW2901
        with conn.begin():
            rows = st.claim(conn, now=now, lease_until=now + DAY, token=token, limit=2)
    return [tuple(row) for row in rows]


def test_outbox_claim_leases_due_rows_for_dispatch(backend: Backend) -> None:
    """A claim leases at most ``limit`` due rows, counts the attempt and hides them
    from the next claim until the lease ends."""
    st = backend.database.outbox(backend.outbox)
    with backend.engine.begin() as conn:
        for i in range(3):
            st.add_row(conn, _outbox_row(f"ship-{i}"))
    first = _claim_due(backend, NOW, "a" * 32)
    assert [(row[1], row[7]) for row in first] == [("ship-0", 1), ("ship-1", 1)]
    second = _claim_due(backend, NOW, "b" * 32)
    assert [(row[1], row[7]) for row in second] == [("ship-2", 1)]
    assert _claim_due(backend, NOW, "c" * 32) == []
    t = st.table.c
    with backend.engine.connect() as conn:
        tokens = dict(conn.execute(select(t.command_id, t.lease_token)).all())
    assert tokens == {"ship-0": "a" * 32, "ship-1": "a" * 32, "ship-2": "b" * 32}
    after_lease = _claim_due(backend, NOW + 2 * DAY, "d" * 32)
    assert [(row[1], row[7]) for row in after_lease] == [("ship-0", 2), ("ship-1", 2)]
