"""Fixtures of the guarantee-table tests: an inbox of the test's own on a SQLite file."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine

import inboxguard


@pytest.fixture
def table_inbox(sqlite_url: str) -> Iterator[inboxguard.Inbox]:
    """An inbox keeping evidence 7 days (no margin), with its tables created."""
    engine = create_engine(sqlite_url)
    box = inboxguard.Inbox(engine, retention=dt.timedelta(days=7), table_prefix="gt_")
    box.create_schema()
    yield box
    engine.dispose()
