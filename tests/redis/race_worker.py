"""A race participant, run as its own (forked) process by test_rd_races.py.

Delivers COMMANDS commands: SHARED from a pool every worker shares (in a
worker-specific order), the rest its own. Each fresh command INCRBYs a total
by its amount and RPUSHes its ID, inside the Redis inbox guard. The lease is
shorter than some blocks (they sleep 0 to 30 ms), so some leases lapse
mid-block, another worker claims the command, and one EXEC is aborted.
InProgressError is retried later, as a broker would redeliver.

Start barrier: every worker connects, then waits on a shared barrier. Puts
one dict on the result queue: applied, duplicates, busy (lease held past
lock_timeout), aborted (EXEC aborted by a concurrent claim, nothing applied),
or error (the traceback).
"""

from __future__ import annotations

import datetime as dt
import random
import time
import traceback
from collections import deque
from typing import Any

import redis

from inboxguard import InProgressError, RedisInbox


def amount_of(command_id: str) -> int:
    """Each command's amount derives from its ID, so the expected total is known."""
    return int(command_id.rsplit("-", 1)[1]) + 1


def run_worker(url: str, prefix: str, w: int, n: int, s: int, barrier: Any, results: Any) -> None:
    """Deliver this worker's commands; put its counts (or its error) on ``results``."""
    try:
        results.put(_deliver_all(url, prefix, w, n, s, barrier))
    except BaseException:
        results.put({"worker": w, "error": traceback.format_exc()})


def _deliver_all(url: str, prefix: str, w: int, n: int, s: int, barrier: Any) -> dict[str, int]:
    client = redis.Redis.from_url(url)
    inbox = RedisInbox(
        client,
        retention=dt.timedelta(days=1),
        key_prefix=prefix,
        lock_timeout=dt.timedelta(milliseconds=10),
        lease=dt.timedelta(milliseconds=25),
    )
    pool = [f"shared-{i}" for i in range(s)]
    pool = pool[w % 2 :] + pool[: w % 2]  # neighbours collide on the same commands
    queue = deque(pool + [f"own{w}-{i}" for i in range(n - s)])
    rng = random.Random(w + 100)
    counts = {"worker": w, "applied": 0, "duplicates": 0, "busy": 0, "aborted": 0}
    client.ping()
    barrier.wait(60)
    deadline = time.monotonic() + 60
    while queue:
        cid = queue.popleft()
        try:
            with client.pipeline() as pipe:
                with inbox.guard(pipe, consumer="race", command_id=cid, payload={"id": cid}) as e:
                    if not e.duplicate:
                        pipe.incrby(f"{prefix}total", amount_of(cid))
                        pipe.rpush(f"{prefix}applied", cid)
                        if cid.startswith("shared"):
                            time.sleep(rng.random() * 0.03)
            counts["duplicates" if e.duplicate else "applied"] += 1
        except InProgressError as error:
            counts["aborted" if "not applied" in str(error) else "busy"] += 1
            if time.monotonic() > deadline:
                raise
            queue.append(cid)
    client.close()
    return counts
