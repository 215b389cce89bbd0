"""Small helpers shared by the core tests: a business schema and waiting."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Column, Integer, MetaData, String, Table, func, select
from sqlalchemy.engine import Connection, Engine


def business_tables(prefix: str) -> tuple[MetaData, Table, Table]:
    """An account table and a ledger table: the consumer's own state."""
    md = MetaData()
    accounts = Table(
        f"{prefix}accounts",
        md,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("balance", Integer, nullable=False),
    )
    ledger = Table(
        f"{prefix}ledger",
        md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("command_id", String(255), nullable=False),
        Column("amount", Integer, nullable=False),
    )
    return md, accounts, ledger


def create_business(engine: Engine, prefix: str, accounts_count: int = 1) -> tuple[Table, Table]:
    """Create the business tables with ``accounts_count`` zero-balance accounts."""
    md, accounts, ledger = business_tables(prefix)
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(accounts.insert(), [{"id": i, "balance": 0} for i in range(accounts_count)])
    return accounts, ledger


def apply(conn: Connection, accounts: Table, ledger: Table, command_id: str, amount: int) -> None:
    """The business mutation: one UPDATE and one INSERT."""
    conn.execute(
        accounts.update().where(accounts.c.id == 0).values(balance=accounts.c.balance + amount)
    )
    conn.execute(ledger.insert().values(command_id=command_id, amount=amount))


def count(engine: Engine, table: Table) -> int:
    """Rows in ``table``."""
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns a truthy value or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            msg = f"condition not met within {timeout}s"
            raise TimeoutError(msg)
        time.sleep(interval)
