"""RD2, RD3: concurrent deliveries of one command apply it once: 8 processes
race on overlapping command IDs, and a claim whose lease lapsed mid-block
loses its EXEC instead of applying twice."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from inboxguard import InProgressError, RedisInbox
from tests.conftest import REDIS_URL
from tests.redis.conftest import DAY
from tests.redis.race_worker import amount_of

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("race_worker.py")


@pytest.mark.e2e
def test_rd2_eight_processes_apply_each_command_once(redis_client: Any, key_prefix: str) -> None:
    """8 processes x 30 commands, 20 of them shared by all: every command is
    applied exactly once (one list entry, the exact total), evidence for each."""
    workers, commands, shared = 8, 30, 20
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), REDIS_URL, key_prefix, *map(str, (w, commands, shared))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for w in range(workers)
    ]
    for proc in procs:  # the start barrier: every worker is connected and waiting
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", proc.communicate()[1][-3000:]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    expected = {f"shared-{i}" for i in range(shared)} | {
        f"own{w}-{i}" for w in range(workers) for i in range(commands - shared)
    }
    applied = [item.decode() for item in redis_client.lrange(f"{key_prefix}applied", 0, -1)]
    assert len(applied) == len(set(applied)) == len(expected)
    assert set(applied) == expected
    assert int(redis_client.get(f"{key_prefix}total")) == sum(amount_of(c) for c in expected)
    assert sum(r["applied"] for r in reports) == len(expected)
    assert sum(r["duplicates"] for r in reports) == workers * commands - len(expected)
    # The workers really raced: claims met a held lease, or lost their EXEC.
    assert sum(r["busy"] + r["aborted"] for r in reports) > 0, reports
    box = RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix)
    assert sum(1 for _ in box.evidence()) == len(expected)


def test_rd3_a_lapsed_lease_loses_its_exec_and_nothing_applies_twice(
    redis_client: Any, key_prefix: str
) -> None:
    """A block outlives its lease; another delivery claims and commits; the
    first block's EXEC is aborted (WATCH): InProgressError, none of its writes."""
    box = RedisInbox(
        redis_client,
        retention=DAY,
        key_prefix=key_prefix,
        lease=dt.timedelta(milliseconds=50),
        lock_timeout=dt.timedelta(seconds=2),
    )
    in_block, second_done = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def slow() -> None:
        try:
            with redis_client.pipeline() as pipe:
                with box.guard(pipe, consumer="c", command_id="slow", payload={}) as entry:
                    pipe.rpush(f"{key_prefix}applied", "slow-first")
                    entry.result = "first"
                    in_block.set()
                    assert second_done.wait(10)
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=slow)
    thread.start()
    assert in_block.wait(10)
    # The second delivery waits for the lease to lapse (50 ms), then claims.
    with redis_client.pipeline() as pipe:
        with box.guard(pipe, consumer="c", command_id="slow", payload={}) as entry:
            assert not entry.duplicate
            pipe.rpush(f"{key_prefix}applied", "slow-second")
            entry.result = "second"
    second_done.set()
    thread.join(10)
    error = outcome.get("error")
    assert isinstance(error, InProgressError), outcome
    assert error.retryable
    assert "not applied" in str(error)
    assert redis_client.lrange(f"{key_prefix}applied", 0, -1) == [b"slow-second"]
    assert box.lookup("c", "slow").result == "second"  # type: ignore[union-attr]
    with redis_client.pipeline() as pipe:  # the redelivery is a duplicate
        with box.guard(pipe, consumer="c", command_id="slow", payload={}) as entry:
            assert (entry.duplicate, entry.result) == (True, "second")
    assert redis_client.exists(box.keys.command("c", "slow").lease) == 0


def test_rd3_a_concurrent_mismatch_while_the_block_ran_is_refused(
    redis_client: Any, key_prefix: str
) -> None:
    """When the delivery that committed first had another payload, the aborted
    block's command is judged again as a mismatch: quarantined, refused."""
    from inboxguard import PayloadMismatchError

    box = RedisInbox(
        redis_client, retention=DAY, key_prefix=key_prefix, lease=dt.timedelta(milliseconds=30)
    )
    in_block, other_done = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def slow() -> None:
        try:
            with redis_client.pipeline() as pipe:
                with box.guard(pipe, consumer="c", command_id="m", payload={"v": 1}):
                    pipe.rpush(f"{key_prefix}applied", "v1")
                    in_block.set()
                    assert other_done.wait(10)
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=slow)
    thread.start()
    assert in_block.wait(10)
    with redis_client.pipeline() as pipe:
        with box.guard(pipe, consumer="c", command_id="m", payload={"v": 2}):
            pipe.rpush(f"{key_prefix}applied", "v2")
    other_done.set()
    thread.join(10)
    assert isinstance(outcome.get("error"), PayloadMismatchError), outcome
    assert redis_client.lrange(f"{key_prefix}applied", 0, -1) == [b"v2"]
    (record,) = box.quarantined("c")
    assert record.reason == "payload_mismatch"
