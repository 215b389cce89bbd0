"""RD16: a Redis server that keeps nothing on disk is signalled, not only
reported by ``durability()``.

``RedisInbox(...)`` and ``check_schema()`` warn with
``RedisDurabilityWarning`` and ``inboxguard doctor`` reports a ``redis``
warning, naming the fix, on the local server (AOF off, no RDB schedule); on
a server of this module's own with the append-only file on, nothing warns.
"""

from __future__ import annotations

import datetime as dt
import random
import shutil
import signal
import socket
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inboxguard import RedisDurabilityWarning, RedisInbox
from inboxguard.cli._windows import discover
from inboxguard.cli.doctor import run_checks
from tests.conftest import REQUIRE, unique
from tests.helpers import wait_until

DAY = dt.timedelta(days=1)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def persistent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Redis server of this module's own with the append-only file on."""
    server = shutil.which("redis-server")
    if server is None:
        if REQUIRE:
            pytest.fail("redis-server is needed")
        pytest.skip("redis-server is needed")
    import redis

    port = next(p for p in random.Random().sample(range(20000, 40000), 200) if not _accepts(p))
    root = Path(tmp_path_factory.mktemp("aof"))
    proc = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--appendonly", "yes",
         "--save", "", "--dir", str(root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(lambda: _accepts(port), timeout=10)
        client = redis.Redis(host="127.0.0.1", port=port)
        yield client
        client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


def _doctor(inbox: RedisInbox) -> list[tuple[str, str]]:
    return [(c.status, c.detail) for c in run_checks(discover(inbox, "x")) if c.check == "redis"]


def test_rd16_a_server_without_persistence_warns(redis_client: Any, key_prefix: str) -> None:
    durability = RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix).durability()
    if durability.appendonly or durability.save:
        pytest.skip("the local Redis keeps its data on disk")
    with pytest.warns(RedisDurabilityWarning, match="appendonly yes"):
        inbox = RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix)
    with pytest.warns(RedisDurabilityWarning, match="keeps nothing on disk"):
        inbox.check_schema()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RedisDurabilityWarning)
        [(status, detail)] = _doctor(inbox)
    assert status == "warn"
    assert "keeps nothing on disk" in detail


def test_rd16_a_server_with_the_append_only_file_does_not_warn(persistent: Any) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inbox = RedisInbox(persistent, retention=DAY, key_prefix=unique("ig") + ":")
        inbox.check_schema()
        [(status, detail)] = _doctor(inbox)
    assert [w for w in caught if issubclass(w.category, RedisDurabilityWarning)] == []
    assert status == "ok"
    assert "AOF is on" in detail
