"""Fixtures of the async guard tests: an inbox and an AsyncEngine on one database."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

import inboxguard

ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}


def async_url(url: str) -> str:
    """The same database through its asyncio driver."""
    scheme, rest = url.split("://", 1)
    return f"{ASYNC_DRIVERS[scheme.split('+')[0]]}://{rest}"


@dataclass
class AsyncSetup:
    """An inbox (sync engine for schema and inspection) and an AsyncEngine on the same DB."""

    inbox: inboxguard.Inbox
    aurl: str
    orders: Table
    name: str

    def engine(self) -> AsyncEngine:
        """A new AsyncEngine; create it inside the test's event loop and dispose of it there."""
        return create_async_engine(self.aurl)


@pytest.fixture(params=["sqlite", "postgresql"])
def setup(request: pytest.FixtureRequest, prefix: str, clock: object) -> Iterator[AsyncSetup]:
    """Each asyncio driver in turn, with the inbox tables and an ``orders`` table."""
    fixture = {"sqlite": "sqlite_url", "postgresql": "pg_url"}[request.param]
    url = str(request.getfixturevalue(fixture))
    engine = create_engine(url)
    box = inboxguard.Inbox(
        engine,
        retention=dt.timedelta(days=30),
        table_prefix=prefix,
        lock_timeout=dt.timedelta(milliseconds=300),
        clock=clock,  # type: ignore[arg-type]
    )
    box.create_schema()
    meta = MetaData()
    orders = Table(
        f"{prefix}orders",
        meta,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("command_id", String(64), nullable=False),
    )
    meta.create_all(engine)
    yield AsyncSetup(box, async_url(url), orders, request.param)
    meta.drop_all(engine)
    box.drop_schema()
    engine.dispose()
