"""A claim whose conflicting row keeps vanishing tries a bounded number of
times, then raises a clear, retryable error (never unbounded recursion)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Engine

from inboxguard import Inbox, InProgressError, is_retryable
from inboxguard.sql.dialects.base.inbox import CLAIM_ATTEMPTS


def _vanish_on_each_insert(engine: Engine, inbox: Inbox) -> list[str]:
    """Make every claim insert of the inbox meet a row that is deleted before
    the claim reads it: on PostgreSQL a trigger skips the insert (the claim's
    snapshot never saw a row), elsewhere the row is put in before the insert
    and taken out right after it, on the claim's own transaction."""
    table = inbox.tables.inbox.name
    seen: list[str] = []
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.execute(
                text(
                    f"CREATE FUNCTION {table}_skip() RETURNS trigger LANGUAGE plpgsql"
                    " AS $$ BEGIN RETURN NULL; END $$"
                )
            )
            conn.execute(
                text(
                    f"CREATE TRIGGER {table}_skip BEFORE INSERT ON {table}"
                    f" FOR EACH ROW EXECUTE FUNCTION {table}_skip()"
                )
            )

    @event.listens_for(engine, "before_cursor_execute")
    def put_row(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith(("INSERT", "WITH", "SET STATEMENT")) and (
            table in statement
        ):
            seen.append(statement)
            if engine.dialect.name != "postgresql":
                cursor.connection.cursor().execute(  # a cursor of its own, same transaction
                    f"INSERT INTO {table} (consumer, command_id, digest, processed_at,"
                    " expires_at) VALUES ('c', 'cmd', 'sha256:x', '2026-01-01', '2026-01-02')"
                )

    @event.listens_for(engine, "after_cursor_execute")
    def take_row(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if seen and statement == seen[-1] and engine.dialect.name != "postgresql":
            cursor.connection.cursor().execute(f"DELETE FROM {table}")

    return seen


def test_claim_of_a_vanishing_row_is_bounded(engine: Engine, inbox: Inbox) -> None:
    """The claim tries CLAIM_ATTEMPTS times, then raises InProgressError."""
    seen = _vanish_on_each_insert(engine, inbox)
    with engine.connect() as conn, conn.begin():
        with (
            pytest.raises(InProgressError, match="deleted between the claim's insert") as info,
            inbox.guard(conn, consumer="c", command_id="cmd", payload={}),
        ):
            pytest.fail("the block must not run")
    assert len(seen) == CLAIM_ATTEMPTS
    assert is_retryable(info.value)
    assert (info.value.consumer, info.value.command_id) == ("c", "cmd")


def test_batch_of_one_whose_row_vanishes_is_bounded(engine: Engine, inbox: Inbox) -> None:
    """A batch of one (PostgreSQL: the single claim's statement) whose row
    vanishes on every insert reads and claims again, then raises a clear,
    retryable InProgressError; nothing runs and nothing is kept."""
    seen = _vanish_on_each_insert(engine, inbox)
    with engine.connect() as conn, conn.begin():
        with (
            pytest.raises(InProgressError, match="deleted between") as info,
            inbox.guard_batch(conn, consumer="c", commands=[("cmd", {})]),
        ):
            pytest.fail("the block must not run")
    assert len(seen) == CLAIM_ATTEMPTS
    assert is_retryable(info.value)
    assert (info.value.consumer, info.value.command_id) == ("c", "cmd")
