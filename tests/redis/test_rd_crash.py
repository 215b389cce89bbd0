"""RD4: a consumer killed (SIGKILL) after queuing its writes and before EXEC
applied nothing; its lease holds other deliveries off until it lapses, then
the redelivery applies the command once."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from inboxguard import InProgressError, RedisInbox
from tests.conftest import REDIS_URL
from tests.helpers import wait_until
from tests.redis.conftest import DAY

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("crash_worker.py")


@pytest.mark.e2e
def test_rd4_kill_before_exec_applies_nothing(redis_client: Any, key_prefix: str) -> None:
    """Nothing of the killed block is in Redis; a redelivery during the lease is
    in progress; after the lease lapses it is fresh and applies once."""
    lease_ms = 1500
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), REDIS_URL, key_prefix, str(lease_ms)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line == "queued", proc.communicate(timeout=10)[1][-3000:]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    box = RedisInbox(
        redis_client, retention=DAY, key_prefix=key_prefix, lock_timeout=dt.timedelta(0)
    )
    assert redis_client.get(f"{key_prefix}total") is None
    assert redis_client.lrange(f"{key_prefix}applied", 0, -1) == []
    assert box.lookup("crash", "crash-1") is None
    lease = box.keys.command("crash", "crash-1").lease
    if redis_client.exists(lease):  # still inside the dead worker's lease
        with pytest.raises(InProgressError), redis_client.pipeline() as pipe:
            with box.guard(pipe, consumer="crash", command_id="crash-1", payload={"n": 1}):
                pass
    wait_until(lambda: not redis_client.exists(lease), timeout=10)
    for expected_duplicate in (False, True):
        with redis_client.pipeline() as pipe:
            with box.guard(pipe, consumer="crash", command_id="crash-1", payload={"n": 1}) as e:
                assert e.duplicate is expected_duplicate
                if not e.duplicate:
                    pipe.incrby(f"{key_prefix}total", 1)
                    pipe.rpush(f"{key_prefix}applied", "crash-1")
    assert redis_client.get(f"{key_prefix}total") == b"1"
    assert redis_client.lrange(f"{key_prefix}applied", 0, -1) == [b"crash-1"]
