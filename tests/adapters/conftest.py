"""Fixtures shared by the adapters' tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine


@pytest.fixture
def one_connection(pg_url: str) -> Iterator[Engine]:
    """A PostgreSQL engine of exactly one connection (what ``tests.adapters.wire`` traces)."""
    engine = create_engine(pg_url, pool_size=1, max_overflow=0)
    yield engine
    engine.dispose()
