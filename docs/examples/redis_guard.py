"""A consumer whose state lives in Redis, guarded by a RedisInbox.

The guard claims the command inside the pipeline's MULTI; the block queues the
consumer's writes; the guard sends EXEC when the block exits, so the claim and
the writes commit together or not at all. Run: python docs/examples/redis_guard.py
(needs Redis on INBOXGUARD_REDIS_URL, default redis://127.0.0.1:6379/0; it
says so and exits 0 when none is reachable).
"""

# needs: redis

from __future__ import annotations

import datetime as dt
import os
import uuid

import redis

from inboxguard import RedisInbox, RetentionPolicy

URL = os.environ.get("INBOXGUARD_REDIS_URL", "redis://127.0.0.1:6379/0")


def add_credit(inbox: RedisInbox, client: redis.Redis, command_id: str, amount: int) -> dict:
    """Credit an account once per command ID; return what the first delivery did."""
    with client.pipeline() as pipe:
        with inbox.guard(
            pipe, consumer="credits", command_id=command_id, payload={"amount": amount}
        ) as entry:
            if entry.duplicate:
                return dict(entry.result)  # the stored result; nothing is queued
            pipe.incrby(f"{inbox.key_prefix}balance", amount)  # queued, not sent yet
            pipe.rpush(f"{inbox.key_prefix}credits", command_id)
            entry.result = {"credited": amount}  # stored in the same EXEC
    return dict(entry.result)


def main() -> None:
    """Credit once, deliver again, show the durability the server reports."""
    client = redis.Redis.from_url(URL)
    try:
        client.ping()
    except redis.ConnectionError:
        print(f"no Redis at {URL}; nothing to show")
        return
    prefix = f"example-{uuid.uuid4().hex[:8]}:"
    inbox = RedisInbox(
        client,
        retention=RetentionPolicy(redelivery=dt.timedelta(days=7)),
        key_prefix=prefix,
    )
    try:
        first = add_credit(inbox, client, "credit-1", 25)
        again = add_credit(inbox, client, "credit-1", 25)  # a redelivery
        assert first == again == {"credited": 25}
        assert client.get(f"{prefix}balance") == b"25"
        assert client.lrange(f"{prefix}credits", 0, -1) == [b"credit-1"]
        print(inbox.durability().summary)
    finally:
        inbox.drop_keys()
        client.close()


if __name__ == "__main__":
    main()
