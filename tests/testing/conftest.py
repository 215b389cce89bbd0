"""The kit's own tests run on SQLite and PostgreSQL (MariaDB is covered by the
ledger and adapter suites the kit is used in)."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> str:
    """SQLite, then PostgreSQL."""
    fixture = {"sqlite": "sqlite_url", "postgresql": "pg_url"}[request.param]
    return str(request.getfixturevalue(fixture))
