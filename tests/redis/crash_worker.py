"""A consumer killed with SIGKILL after queuing its writes, before EXEC.

Usage: python crash_worker.py URL PREFIX LEASE_MS

Guards command ``crash-1``, queues INCRBY and RPUSH on the pipeline, prints
``queued`` and sleeps inside the block until it is killed.
"""

from __future__ import annotations

import datetime as dt
import sys
import time

import redis

from inboxguard import RedisInbox


def main() -> None:
    url, prefix, lease_ms = sys.argv[1:4]
    client = redis.Redis.from_url(url)
    inbox = RedisInbox(
        client,
        retention=dt.timedelta(days=1),
        key_prefix=prefix,
        lease=dt.timedelta(milliseconds=int(lease_ms)),
    )
    with client.pipeline() as pipe:
        with inbox.guard(pipe, consumer="crash", command_id="crash-1", payload={"n": 1}) as e:
            assert not e.duplicate
            pipe.incrby(f"{prefix}total", 1)
            pipe.rpush(f"{prefix}applied", "crash-1")
            print("queued", flush=True)
            time.sleep(600)


if __name__ == "__main__":
    main()
