"""G29-G31: no result store that nothing can replay, and every one a duplicate can.

The result store is a statement of its own in the guard's transaction. These
read it off the wire on PostgreSQL (libpq's trace, :mod:`tests.adapters.wire`)
and check the rows on every database.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from inboxguard import Inbox
from tests.adapters.wire import traced
from tests.helpers import apply, count, create_business

RETENTION = dt.timedelta(days=7)


def _stored(engine: Engine, inbox: Inbox) -> dict[str, Any]:
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(f"SELECT command_id, result FROM {inbox.table_prefix}inbox")
        return dict(rows.all())


def _guard(inbox: Inbox, engine: Engine, tables: Any, cid: str, **result: Any) -> Any:
    """One delivery; the block assigns ``result["value"]`` when given."""
    accounts, ledger = tables
    with engine.connect() as conn, conn.begin():
        with inbox.guard(conn, consumer="c", command_id=cid, payload={"id": cid}) as entry:
            if not entry.duplicate:
                apply(conn, accounts, ledger, cid, 1)
                if "value" in result:
                    entry.result = result["value"]
    return entry


@pytest.mark.postgresql
def test_g29_a_block_that_returns_nothing_sends_no_result_store(
    one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    """A block that assigns no result, or ``None``, leaves nothing a duplicate
    could replay: no result store is sent, the row holds no result, and a
    duplicate still runs nothing and reads ``None``."""
    engine = one_connection
    inbox = Inbox(engine, retention=RETENTION, table_prefix=prefix)
    inbox.create_schema()
    tables = create_business(engine, prefix)
    try:
        _guard(inbox, engine, tables, "warm")
        with traced(engine, tmp_path) as unset:
            _guard(inbox, engine, tables, "a")
        with traced(engine, tmp_path) as none:
            _guard(inbox, engine, tables, "b", value=None)
        with traced(engine, tmp_path) as some:
            _guard(inbox, engine, tables, "c", value={"ok": 1})
        again = [_guard(inbox, engine, tables, cid) for cid in ("a", "b", "c")]
        stored = _stored(engine, inbox)
        applied = count(engine, tables[1])
    finally:
        inbox.drop_schema()
    for wire in (unset, none):
        kinds = wire.kinds(prefix, f"{prefix}ledger")
        assert not any("result store" in k for k in kinds), wire.statements
        assert kinds[0] == "BEGIN + savepoint + claim", wire.statements
    assert some.kinds(prefix, f"{prefix}ledger")[-1] == "result store + release + COMMIT", (
        some.statements
    )
    assert stored == {"warm": None, "a": None, "b": None, "c": '{"ok":1}'}
    assert [e.duplicate for e in again] == [True, True, True]
    assert [e.result for e in again] == [None, None, {"ok": 1}]
    assert applied == 4


@pytest.mark.parametrize("value", [0, False, "", [], {}], ids=repr)
def test_g30_a_falsy_result_is_stored_and_replayed(
    inbox: Inbox, engine: Engine, value: object
) -> None:
    """Only ``None`` is skipped: a result that is merely falsy is stored, and
    a duplicate returns it as it was assigned (not ``None``)."""
    tables = create_business(engine, inbox.table_prefix)
    first = _guard(inbox, engine, tables, "cmd", value=value)
    second = _guard(inbox, engine, tables, "cmd")
    assert not first.duplicate
    assert second.duplicate
    assert second.result == value
    assert type(second.result) is type(value)
    assert _stored(engine, inbox)["cmd"] is not None
    assert count(engine, tables[1]) == 1


@pytest.mark.postgresql
def test_g31_a_batch_stores_only_the_results_its_entries_assigned(
    one_connection: Engine, prefix: str, tmp_path: Path
) -> None:
    """``guard_batch``: a batch whose fresh entries assign no result sends no
    result store; in a mixed batch only the assigned results are stored, and
    the duplicates of the batch read each one (``None`` where none was)."""
    engine = one_connection
    inbox = Inbox(engine, retention=RETENTION, table_prefix=prefix)
    inbox.create_schema()
    accounts, ledger = create_business(engine, prefix)

    def batch(ids: list[str], results: dict[str, Any]) -> list[Any]:
        with engine.connect() as conn, conn.begin():
            commands = [(cid, {"id": cid}) for cid in ids]
            with inbox.guard_batch(conn, consumer="c", commands=commands) as entries:
                for entry in entries:
                    if not entry.fresh:
                        continue
                    apply(conn, accounts, ledger, entry.command_id, 1)
                    if entry.command_id in results:
                        entry.result = results[entry.command_id]
        return list(entries)

    try:
        batch(["warm"], {})
        with traced(engine, tmp_path) as empty:
            batch(["a", "b"], {})
        with traced(engine, tmp_path) as mixed:
            batch(["c", "d"], {"d": [1]})
        again = batch(["a", "b", "c", "d"], {})
        stored = _stored(engine, inbox)
        applied = count(engine, ledger)
    finally:
        inbox.drop_schema()
    assert not any(f"UPDATE {prefix}inbox" in s for s in empty.statements), empty.statements
    assert sum(f"UPDATE {prefix}inbox" in s for s in mixed.statements) == 1, mixed.statements
    assert stored == {"warm": None, "a": None, "b": None, "c": None, "d": "[1]"}
    assert [e.duplicate for e in again] == [True, True, True, True]
    assert [e.result for e in again] == [None, None, None, [1]]
    assert applied == 5
