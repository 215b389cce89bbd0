"""RD11: the Redis inbox on a real Redis Cluster (three masters started for
this module from the local redis-server binary): keys tagged like the
command commit in one EXEC, a key in another slot is refused before EXEC,
a mismatch is quarantined, and racing deliveries apply a command once."""

from __future__ import annotations

import datetime as dt
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inboxguard import ConfigurationError, InProgressError, PayloadMismatchError, RedisInbox
from tests.conftest import REQUIRE, unique
from tests.helpers import wait_until

DAY = dt.timedelta(days=1)


def _free_port(taken: list[int]) -> int:
    """A port that is free, and whose cluster bus port (+10000) is free too."""
    for port in random.Random().sample(range(20000, 40000), 200):
        if port in taken or _accepts(port) or _accepts(port + 10000):
            continue
        return port
    msg = "no free port pair for a cluster node"
    raise RuntimeError(msg)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A three-master Redis Cluster of this module's own, stopped afterwards."""
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if server is None or cli is None:
        reason = "redis-server and redis-cli are needed to start a Redis Cluster"
        if REQUIRE:
            pytest.fail(reason)
        pytest.skip(reason)
    from redis.cluster import RedisCluster

    root = tmp_path_factory.mktemp("cluster")
    ports: list[int] = []
    for _ in range(3):
        ports.append(_free_port(ports))
    procs = []
    for port in ports:
        node = Path(root, str(port))
        node.mkdir()
        procs.append(
            subprocess.Popen(
                [server, "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                 "--cluster-config-file", "nodes.conf", "--save", "", "--appendonly", "no"],
                cwd=node, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
        )  # fmt: skip
    try:
        for port in ports:
            wait_until(lambda p=port: _accepts(p), timeout=10)
        subprocess.run(
            [cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports),
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, capture_output=True, timeout=30,
        )  # fmt: skip
        client = RedisCluster(host="127.0.0.1", port=ports[0])
        wait_until(lambda: client.cluster_info().get("cluster_state") == "ok", timeout=20)
        yield client
        client.close()
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(10)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture
def box(cluster: Any) -> Iterator[RedisInbox]:
    inbox = RedisInbox(cluster, retention=DAY, key_prefix=unique("cl") + ":")
    assert inbox.cluster  # on by default for a RedisCluster client
    yield inbox
    inbox.drop_keys()


def _deliver(client: Any, box: RedisInbox, cid: str, payload: Any, key: str) -> bool:
    with client.pipeline(transaction=True) as pipe:
        with box.guard(pipe, consumer="c", command_id="{a-1}:" + cid, payload=payload) as e:
            if not e.duplicate:
                pipe.incrby(key, 1)
                pipe.rpush(key + ":log", cid)
                e.result = cid
    return not e.duplicate


def test_rd11_tagged_keys_commit_and_other_slots_are_refused(cluster: Any, box: RedisInbox) -> None:
    """Fresh then duplicate on tagged keys; a key in another slot is refused
    before EXEC (nothing applied); a mismatch is quarantined."""
    key = f"{box.key_prefix}balance:{{a-1}}"
    assert _deliver(cluster, box, "t-1", {}, key)
    assert not _deliver(cluster, box, "t-1", {}, key)
    assert cluster.get(key) == b"1"
    assert box.lookup("c", "{a-1}:t-1").result == "t-1"  # type: ignore[union-attr]
    with pytest.raises(ConfigurationError, match="another Redis Cluster hash slot"):
        _deliver(cluster, box, "t-2", {}, f"{box.key_prefix}balance:{{a-2}}")
    assert box.lookup("c", "{a-1}:t-2") is None
    with pytest.raises(PayloadMismatchError):
        _deliver(cluster, box, "t-1", {"other": 1}, key)
    (record,) = box.quarantined("c")
    assert record.reason == "payload_mismatch"
    assert cluster.get(key) == b"1"


def test_rd11_racing_deliveries_apply_once_on_the_cluster(cluster: Any, box: RedisInbox) -> None:
    """6 threads deliver the same 5 commands; each is applied once."""
    key = f"{box.key_prefix}balance:{{a-1}}"
    fresh: list[bool] = []
    lock = threading.Lock()

    def worker() -> None:
        for i in range(5):
            deadline = time.monotonic() + 20
            while True:
                try:
                    outcome = _deliver(cluster, box, f"r-{i}", {}, key)
                    break
                except InProgressError:
                    assert time.monotonic() < deadline
            with lock:
                fresh.append(outcome)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sum(fresh) == 5
    assert len(fresh) == 30
    assert cluster.get(key) == b"5"
    assert sorted(cluster.lrange(key + ":log", 0, -1)) == [f"r-{i}".encode() for i in range(5)]
