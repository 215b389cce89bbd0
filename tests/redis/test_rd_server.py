"""RD5, RD6: the server's eviction policy is checked at construction and its
durability is read from it; the Redis inbox imports without redis installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from inboxguard import ConfigurationError, RedisInbox
from inboxguard.inbox.redis import RedisDurability
from tests.redis.conftest import DAY

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def evicting(redis_client: Any) -> Any:
    """The shared server with ``maxmemory-policy allkeys-lru`` for the test,
    restored to what it was afterwards, whatever happens."""
    before = redis_client.config_get("maxmemory-policy")["maxmemory-policy"]
    try:
        redis_client.config_set("maxmemory-policy", "allkeys-lru")
        yield redis_client
    finally:
        redis_client.config_set("maxmemory-policy", before)
    assert redis_client.config_get("maxmemory-policy")["maxmemory-policy"] == before


def test_rd5_an_evicting_server_is_refused(evicting: Any, key_prefix: str) -> None:
    """allkeys-lru could evict evidence: refused with the setting and the fix
    named, unless allow_eviction=True (then the durability report says so)."""
    with pytest.raises(ConfigurationError) as caught:
        RedisInbox(evicting, retention=DAY, key_prefix=key_prefix)
    text = str(caught.value)
    assert "maxmemory-policy" in text
    assert "'allkeys-lru'" in text
    assert "noeviction" in text
    assert "allow_eviction=True" in text
    box = RedisInbox(evicting, retention=DAY, key_prefix=key_prefix, allow_eviction=True)
    assert box.maxmemory_policy == "allkeys-lru"
    assert "may delete evidence" in box.durability().summary
    with pytest.raises(ConfigurationError, match="maxmemory-policy"):
        RedisInbox(evicting, retention=DAY, key_prefix=key_prefix, allow_eviction=True).__class__(
            evicting, retention=DAY, key_prefix=key_prefix
        )


def test_rd5_check_schema_checks_the_policy_again(evicting: Any, key_prefix: str) -> None:
    """A worker's start-up check (check_schema) sees a policy changed since."""
    evicting.config_set("maxmemory-policy", "noeviction")
    box = RedisInbox(evicting, retention=DAY, key_prefix=key_prefix)
    evicting.config_set("maxmemory-policy", "volatile-ttl")
    with pytest.raises(ConfigurationError, match="volatile-ttl"):
        box.check_schema()


def test_rd6_durability_is_read_from_the_server(redis_client: Any, key_prefix: str) -> None:
    """The report matches what the server says of AOF, fsync and snapshots."""
    box = RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix)
    found = box.durability()
    assert isinstance(found, RedisDurability)
    config = redis_client.config_get("*")
    assert found.appendonly is (config["appendonly"] == "yes")
    assert found.appendfsync == config["appendfsync"]
    assert found.save == config["save"]
    assert found.maxmemory_policy == config["maxmemory-policy"] == "noeviction"
    assert found.role == redis_client.info("replication")["role"]
    plain = found.as_dict()
    assert plain["appendonly"] is found.appendonly
    assert "asynchronous" in plain["summary"]
    if not found.appendonly and not found.save:  # this machine: --save "" --appendonly no
        assert "No persistence" in found.summary


def test_rd6_inboxguard_imports_without_redis() -> None:
    """RedisInbox is importable from inboxguard when redis is not installed."""
    code = (
        "import sys; sys.modules['redis'] = None\n"
        "import inboxguard\n"
        "assert inboxguard.RedisInbox.__name__ == 'RedisInbox'\n"
        "assert 'redis' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
