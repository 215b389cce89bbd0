"""G2: a redelivery with the same digest is a duplicate and gets the stored result."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import Inbox, current_session
from tests.helpers import apply, count, create_business


def _process(inbox: Inbox, engine: Engine, tables: Any, payload: dict[str, Any]) -> Any:
    accounts, ledger = tables
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="cmd", payload=payload) as entry:
            if entry.duplicate:
                return entry
            apply(session.connection(), accounts, ledger, "cmd", payload["amount"])
            entry.result = {"charged": payload["amount"], "items": [1, 2]}
            return entry


def test_g02_duplicate_is_skipped_with_the_stored_result(inbox: Inbox, engine: Engine) -> None:
    """The second delivery sees duplicate=True, the first result, and no new mutation."""
    tables = create_business(engine, inbox.table_prefix)
    first = _process(inbox, engine, tables, {"amount": 7})
    second = _process(inbox, engine, tables, {"amount": 7})
    assert not first.duplicate
    assert second.duplicate
    assert second.result == {"charged": 7, "items": [1, 2]}
    assert count(engine, tables[1]) == 1


def test_g02_key_order_does_not_make_a_mismatch(inbox: Inbox, engine: Engine) -> None:
    """A re-serialised payload with other key order is still the same command."""
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="k", payload={"a": 1, "b": 2}):
            pass
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="k", payload={"b": 2, "a": 1}) as e:
            assert e.duplicate


def test_g02_duplicate_costs_one_round_trip(inbox: Inbox, engine: Engine) -> None:
    """Verifying a committed duplicate issues one statement (two on MariaDB/MySQL)."""
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="rt", payload={}):
            pass
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="rt", payload={}) as entry:
            assert entry.duplicate
    claim_statements = [s for s in statements if "inbox" in s]
    expected = 2 if engine.dialect.name in {"mysql", "mariadb"} else 1
    assert len(claim_statements) == expected, claim_statements


def test_g02_handler_runs_once_and_replays_the_result(inbox: Inbox, engine: Engine) -> None:
    """@inbox.handler runs the function for a fresh command only."""
    calls: list[int] = []

    @inbox.handler(consumer="orders", command_id="order_id")
    def place(session: Session, order_id: str, qty: int) -> dict[str, Any]:
        assert current_session() is session
        calls.append(qty)
        return {"order": order_id, "qty": qty}

    for _ in range(3):
        with Session(engine) as session, session.begin():
            result = place(session, "o-1", qty=2)
        assert result == {"order": "o-1", "qty": 2}
    assert calls == [2]


def test_g02_handler_command_id_callable_and_int_ids(inbox: Inbox, engine: Engine) -> None:
    """command_id may be a callable; int IDs become decimal strings."""

    @inbox.handler(consumer="c", command_id=lambda cmd: cmd["id"])
    def handle(session: Session, cmd: dict[str, Any]) -> None:
        return None

    with Session(engine) as session, session.begin():
        handle(session, {"id": 42})
    assert inbox.lookup("c", "42") is not None


def test_g02_duplicate_result_cannot_be_replaced(inbox: Inbox, engine: Engine) -> None:
    """A duplicate's result is read-only."""
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="r", payload={}) as e:
            e.result = 1
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="r", payload={}) as e:
            with pytest.raises(AttributeError):
                e.result = 2
            assert e.result == 1
