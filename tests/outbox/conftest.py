"""Fixtures of the outbox tests: an outbox per test and a recording transport."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.engine import Engine

import inboxguard
from tests.outbox.helpers import Recorder


@pytest.fixture
def outbox(engine: Engine, prefix: str, clock: Any) -> Iterator[inboxguard.Outbox]:
    """An outbox with its own table on each supported database, on a fake clock."""
    box = inboxguard.Outbox(engine, table_prefix=prefix, clock=clock)
    box.create_schema()
    yield box
    box.drop_schema()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()
