"""The business table and the inbox of the reference app."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Column, Integer, MetaData, String, Table, func, select
from sqlalchemy.engine import Engine

import inboxguard


def shipments_table(prefix: str) -> Table:
    """One row per application of a ``ship`` command.

    Deliberately no unique constraint: a command applied twice shows up as
    two rows, which is what the end-to-end tests look for.
    """
    return Table(
        f"{prefix}shipments",
        MetaData(),
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("order_id", String(64), nullable=False, index=True),
        Column("sku", String(64), nullable=False),
        Column("qty", Integer, nullable=False),
        Column("worker_pid", Integer, nullable=False),
    )


#: The asyncio driver of each database the reference app runs on.
ASYNC_DRIVERS = {"postgresql": "postgresql+asyncpg", "sqlite": "sqlite+aiosqlite"}


def async_db_url(url: str) -> str:
    """The same database through its asyncio driver (for the ``async def`` actor)."""
    scheme, rest = url.split("://", 1)
    return f"{ASYNC_DRIVERS[scheme.split('+')[0]]}://{rest}"


def make_inbox(engine: Engine, prefix: str, retention_days: float) -> inboxguard.Inbox:
    """The inbox; its only replay window is ``retention_days``."""
    policy = inboxguard.RetentionPolicy(replay=dt.timedelta(days=retention_days))
    return inboxguard.Inbox(engine, retention=policy, table_prefix=f"{prefix}inbox_")


def create_schema(engine: Engine, prefix: str) -> None:
    """Create the business and inbox tables (idempotent)."""
    shipments_table(prefix).create(engine, checkfirst=True)
    make_inbox(engine, prefix, 45).create_schema()


def drop_schema(engine: Engine, prefix: str) -> None:
    """Drop every table the app created."""
    shipments_table(prefix).drop(engine, checkfirst=True)
    make_inbox(engine, prefix, 45).drop_schema()


def applications(engine: Engine, prefix: str) -> dict[str, int]:
    """How many times each order was applied."""
    table = shipments_table(prefix)
    stmt = select(table.c.order_id, func.count()).group_by(table.c.order_id)
    with engine.connect() as conn:
        return {str(k): int(v) for k, v in conn.execute(stmt).tuples()}


def total_rows(engine: Engine, prefix: str) -> int:
    """Rows in the business table."""
    table = shipments_table(prefix)
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())
