"""RD2, RD3: concurrent deliveries of one command apply it once: 8 processes
race on overlapping command IDs, and a claim whose lease lapsed mid-block
loses its EXEC instead of applying twice."""

from __future__ import annotations

import datetime as dt
import multiprocessing
import threading
from typing import Any

import pytest

from inboxguard import InProgressError, RedisInbox
from tests.conftest import REDIS_URL
from tests.redis.conftest import DAY
from tests.redis.race_worker import amount_of, run_worker


@pytest.mark.e2e
def test_rd2_eight_processes_apply_each_command_once(redis_client: Any, key_prefix: str) -> None:
    """8 processes x 30 commands, 20 of them shared by all: every command is
    applied exactly once (one list entry, the exact total), evidence for each.
    The processes are forked from this one (no interpreter start each)."""
    workers, commands, shared = 8, 30, 20
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(workers), ctx.Queue()
    procs = [
        ctx.Process(
            target=run_worker,
            args=(REDIS_URL, key_prefix, w, commands, shared, barrier, results),
            daemon=True,
        )
        for w in range(workers)
    ]
    for proc in procs:
        proc.start()
    reports = [results.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(30)
    assert not [r for r in reports if "error" in r], reports
    assert all(proc.exitcode == 0 for proc in procs)
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


def test_rd3_keys_the_caller_watched_keep_their_meaning(redis_client: Any, key_prefix: str) -> None:
    """A pipeline on which the caller WATCHed its own key (read-modify-write):
    a change to that key during the block aborts the EXEC, claim included;
    InProgressError, and the redelivery is fresh."""
    box = RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix)
    stock = f"{key_prefix}stock"
    redis_client.set(stock, 10)
    with pytest.raises(InProgressError, match="a key the caller watched"):
        with redis_client.pipeline() as pipe:
            pipe.watch(stock)
            left = int(pipe.get(stock))
            with box.guard(pipe, consumer="c", command_id="w", payload={}):
                redis_client.set(stock, 3)  # another client sells 7 meanwhile
                pipe.set(stock, left - 1)
    assert redis_client.get(stock) == b"3"
    assert box.lookup("c", "w") is None
    with redis_client.pipeline() as pipe:
        pipe.watch(stock)
        left = int(pipe.get(stock))
        with box.guard(pipe, consumer="c", command_id="w", payload={}) as entry:
            assert not entry.duplicate
            pipe.set(stock, left - 1)
    assert redis_client.get(stock) == b"2"
