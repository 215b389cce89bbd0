"""Fixtures shared by the guarantee tests that read the wire."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import Engine

from inboxguard import Inbox

#: The retention of the wire tests' inbox.
RETENTION = dt.timedelta(days=7)


@pytest.fixture
def box(one_connection: Engine, prefix: str) -> Iterator[Inbox]:
    """An inbox on an engine of one pooled PostgreSQL connection (so a trace of
    that connection sees every statement), its schema created and dropped."""
    inbox = Inbox(one_connection, retention=RETENTION, table_prefix=prefix)
    inbox.create_schema()
    yield inbox
    inbox.drop_schema()
