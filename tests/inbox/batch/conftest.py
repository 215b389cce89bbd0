"""Fixtures of the batch claim tests: an inbox with a short lock timeout and
a controllable clock, and the business tables, on each database."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Table, event, select
from sqlalchemy.engine import Engine

import inboxguard
from tests.conftest import FakeClock
from tests.helpers import create_business

RETENTION = dt.timedelta(days=30)


@dataclass
class Setup:
    """An inbox, its engine, the business tables and the clock."""

    inbox: inboxguard.Inbox
    engine: Engine
    accounts: Table
    ledger: Table
    clock: FakeClock

    def ledger_ids(self) -> list[str]:
        """The command IDs of every business row, sorted."""
        with self.engine.connect() as conn:
            return sorted(conn.execute(select(self.ledger.c.command_id)).scalars())


@pytest.fixture
def setup(engine: Engine, prefix: str, clock: FakeClock) -> Iterator[Setup]:
    """The inbox (300 ms lock timeout) and business tables on each database."""
    box = inboxguard.Inbox(
        engine,
        retention=RETENTION,
        table_prefix=prefix,
        lock_timeout=dt.timedelta(milliseconds=300),
        clock=clock,
    )
    box.create_schema()
    accounts, ledger = create_business(engine, prefix)
    yield Setup(box, engine, accounts, ledger, clock)
    accounts.metadata.drop_all(engine)
    box.drop_schema()


class StatementLog:
    """The statements an engine runs while the log is open (not counting PRAGMAs)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.statements: list[str] = []

    def _seen(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not statement.lstrip().upper().startswith("PRAGMA"):
            self.statements.append(statement)

    def __enter__(self) -> StatementLog:
        event.listen(self.engine, "before_cursor_execute", self._seen)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(self.engine, "before_cursor_execute", self._seen)
