"""RD17: the claim's WATCH and lease script go to Redis in one write.

Round trips are counted on the client side: a connection class that counts
each write of commands to the socket (``send_packed_command``), on a pool of
its own, sync and asyncio. Each test also checks what was applied.
"""

from __future__ import annotations

import asyncio
from typing import Any

from inboxguard import RedisInbox
from tests.conftest import REDIS_URL
from tests.redis.conftest import DAY


def _counting_client() -> tuple[Any, list[int]]:
    import redis

    writes = [0]

    class Counting(redis.Connection):
        def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
            writes[0] += 1
            super().send_packed_command(*args, **kwargs)

    pool = redis.ConnectionPool.from_url(REDIS_URL, connection_class=Counting)
    return redis.Redis(connection_pool=pool), writes


def _deliver(box: RedisInbox, client: Any, applied: str, cid: str) -> bool:
    with client.pipeline() as pipe:
        with box.guard(pipe, consumer="c", command_id=cid, payload={"n": 1}) as e:
            if not e.duplicate:
                pipe.rpush(applied, cid)
    return not e.duplicate


def test_rd17_a_fresh_command_costs_two_round_trips(redis_client: Any, key_prefix: str) -> None:
    """A fresh command: one write of ``WATCH`` and the lease script, one of
    ``MULTI``...``EXEC``; a duplicate: the first write, then its empty
    transaction ends without ``EXEC`` work of its own. Each applies once, and
    a server that lost its scripts (``SCRIPT FLUSH``) is sent the script
    again."""
    client, writes = _counting_client()
    box = RedisInbox(client, retention=DAY, key_prefix=key_prefix)
    applied = f"{key_prefix}applied"
    try:
        assert _deliver(box, client, applied, "warm")
        writes[0] = 0
        assert _deliver(box, client, applied, "a")
        fresh = writes[0]
        writes[0] = 0
        assert not _deliver(box, client, applied, "a")
        duplicate = writes[0]
        redis_client.script_flush()
        assert _deliver(box, client, applied, "after flush")
        assert not _deliver(box, client, applied, "after flush")
    finally:
        client.close()
    assert fresh == 2
    assert duplicate <= 2
    assert redis_client.lrange(applied, 0, -1) == [b"warm", b"a", b"after flush"]


def test_rd17_guard_async_claims_in_one_write(redis_client: Any, key_prefix: str) -> None:
    """The same on ``redis.asyncio``: a fresh command costs two writes, and
    concurrent deliveries of one command still apply it once."""
    import redis.asyncio as aioredis

    writes = [0]

    class Counting(aioredis.Connection):
        async def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
            writes[0] += 1
            await super().send_packed_command(*args, **kwargs)

    box = RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix)
    applied = f"{key_prefix}applied"

    async def deliver(client: Any, cid: str) -> bool:
        async with client.pipeline() as pipe:
            async with box.guard_async(pipe, consumer="c", command_id=cid, payload={"n": 1}) as e:
                if not e.duplicate:
                    pipe.rpush(applied, cid)
        return not e.duplicate

    async def main() -> tuple[int, list[bool]]:
        pool = aioredis.ConnectionPool.from_url(REDIS_URL, connection_class=Counting)
        client = aioredis.Redis(connection_pool=pool)
        try:
            assert await deliver(client, "warm")
            writes[0] = 0
            assert await deliver(client, "a")
            fresh = writes[0]
            raced = await asyncio.gather(
                *(deliver(client, "b") for _ in range(5)), return_exceptions=True
            )
            return fresh, [r is True for r in raced]
        finally:
            await client.aclose()

    fresh, raced = asyncio.run(main())
    assert fresh == 2
    assert sum(raced) == 1
    assert redis_client.lrange(applied, 0, -1).count(b"b") == 1
