"""The ``store`` fixture: each store of the registry in turn (ids = store names)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from inboxguard.testing.conformance import StoreHarness
from tests.stores.registry import STORES


@pytest.fixture(params=sorted(STORES), ids=str)
def store(request: pytest.FixtureRequest) -> Iterator[StoreHarness]:
    """An isolated store, removed after the test."""
    with STORES[request.param](request) as harness:
        yield harness
