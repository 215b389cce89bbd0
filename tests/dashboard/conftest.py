"""A PostgreSQL database filled by the scenario runs (tests/dashboard/scenario.py),
one table prefix per test module."""

from __future__ import annotations

import pytest

from tests.conftest import unique
from tests.dashboard.scenario import Filled, fill


@pytest.fixture(scope="module")
def filled(pg_url: str) -> tuple[str, str, Filled]:
    """(database URL, table prefix, what the scenario left behind)."""
    prefix = unique("d") + "_"
    return pg_url, prefix, fill(pg_url, prefix)
