"""Fixtures of the retention tests: an inbox with a 10-day horizon on a fake clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.engine import Engine

import inboxguard
from tests.inbox.retention.helpers import policy


@pytest.fixture
def box(engine: Engine, prefix: str, clock: object) -> Iterator[inboxguard.Inbox]:
    """An inbox with a 10-day horizon and a 2-day result TTL on a fake clock."""
    inbox = inboxguard.Inbox(engine, retention=policy(), table_prefix=prefix, clock=clock)
    inbox.create_schema()
    yield inbox
    inbox.drop_schema()
