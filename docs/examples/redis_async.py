"""The Redis inbox on redis.asyncio: ``guard_async`` takes an asyncio pipeline.

Build the RedisInbox on a sync client (it checks the server's eviction policy
at construction and serves lookups); guard deliveries on pipelines of an
asyncio client on the same server. Run: python docs/examples/redis_async.py
"""

# needs: redis

from __future__ import annotations

import asyncio
import datetime as dt
import os
import uuid

import redis
import redis.asyncio as aioredis

from inboxguard import RedisInbox

URL = os.environ.get("INBOXGUARD_REDIS_URL", "redis://127.0.0.1:6379/0")


async def handle(inbox: RedisInbox, client: aioredis.Redis, command_id: str) -> bool:
    """Apply one command; True when it was fresh."""
    async with client.pipeline() as pipe:
        async with inbox.guard_async(
            pipe, consumer="points", command_id=command_id, payload={"points": 3}
        ) as entry:
            if not entry.duplicate:
                pipe.incrby(f"{inbox.key_prefix}points", 3)
    return not entry.duplicate


async def run(inbox: RedisInbox) -> None:
    """Deliver one command three times at once."""
    client = aioredis.Redis.from_url(URL)
    try:
        fresh = await asyncio.gather(
            *(handle(inbox, client, "p-1") for _ in range(3)), return_exceptions=True
        )
        # One delivery applied it; the others were duplicates, or met its lease
        # (InProgressError: redeliver later).
        assert sum(result is True for result in fresh) == 1, fresh
    finally:
        await client.aclose()


def main() -> None:
    """Run the sample on a prefix of its own, then delete its keys."""
    sync = redis.Redis.from_url(URL)
    try:
        sync.ping()
    except redis.ConnectionError:
        print(f"no Redis at {URL}; nothing to show")
        return
    inbox = RedisInbox(
        sync, retention=dt.timedelta(days=7), key_prefix=f"example-{uuid.uuid4().hex[:8]}:"
    )
    try:
        asyncio.run(run(inbox))
        assert sync.get(f"{inbox.key_prefix}points") == b"3"
    finally:
        inbox.drop_keys()
        sync.close()


if __name__ == "__main__":
    main()
