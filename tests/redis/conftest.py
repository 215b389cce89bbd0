"""Fixtures of the Redis inbox tests: a client on the local server and a key
prefix of each test's own (its keys are deleted afterwards)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import REDIS_URL, require_service, unique


@pytest.fixture
def redis_client() -> Iterator[Any]:
    """A sync client on the local Redis."""
    require_service("redis")
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    yield client
    client.close()


@pytest.fixture
def key_prefix(redis_client: Any) -> Iterator[str]:
    """A key prefix no other test uses; every key under it is deleted afterwards."""
    prefix = unique("ig") + ":"
    yield prefix
    keys = list(redis_client.scan_iter(match=prefix + "*", count=1000))
    if keys:
        redis_client.delete(*keys)


DAY = dt.timedelta(days=1)
