"""RD8: guard_async on redis.asyncio pipelines: the same decisions and errors
as the sync guard (fresh, duplicate with result, mismatch quarantined, a
failing block discards everything), and concurrent tasks apply a command once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from inboxguard import ConfigurationError, InProgressError, PayloadMismatchError, RedisInbox
from tests.conftest import REDIS_URL
from tests.redis.conftest import DAY


def test_rd8_guard_async_keeps_the_contract(redis_client: Any, key_prefix: str) -> None:
    """Fresh then duplicate (stored result), a failing block writes nothing, a
    mismatch is quarantined, a sync pipeline is refused."""
    import redis.asyncio as aioredis

    box = RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix)
    applied = f"{key_prefix}applied"

    async def deliver(client: Any, cid: str, payload: Any, fail: bool = False) -> Any:
        async with client.pipeline() as pipe:
            async with box.guard_async(pipe, consumer="c", command_id=cid, payload=payload) as e:
                if not e.duplicate:
                    pipe.rpush(applied, cid)
                    e.result = {"cid": cid}
                    if fail:
                        raise RuntimeError("boom")
        return e.duplicate, e.result

    async def main() -> None:
        client = aioredis.Redis.from_url(REDIS_URL)
        try:
            with pytest.raises(RuntimeError, match="boom"):
                await deliver(client, "a1", {"n": 1}, fail=True)
            assert await deliver(client, "a1", {"n": 1}) == (False, {"cid": "a1"})
            assert await deliver(client, "a1", {"n": 1}) == (True, {"cid": "a1"})
            with pytest.raises(PayloadMismatchError):
                await deliver(client, "a1", {"n": 2})
            with pytest.raises(ConfigurationError, match="guard_async"):
                with redis_client.pipeline() as sync_pipe:
                    async with box.guard_async(sync_pipe, consumer="c", command_id="x", payload={}):
                        pass
            with pytest.raises(ConfigurationError, match="guard_async"):
                async with client.pipeline() as pipe:
                    with box.guard(pipe, consumer="c", command_id="x", payload={}):
                        pass
        finally:
            await client.aclose()

    asyncio.run(main())
    assert redis_client.lrange(applied, 0, -1) == [b"a1"]
    (record,) = box.quarantined("c")
    assert record.reason == "payload_mismatch"


def test_rd8_concurrent_tasks_apply_once(redis_client: Any, key_prefix: str) -> None:
    """20 tasks deliver 5 commands at once; in-progress ones retry; each applies once."""
    import redis.asyncio as aioredis

    box = RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix)
    applied = f"{key_prefix}applied"

    async def worker(client: Any, cid: str) -> bool:
        while True:
            try:
                async with client.pipeline() as pipe:
                    async with box.guard_async(
                        pipe, consumer="c", command_id=cid, payload={}
                    ) as entry:
                        if not entry.duplicate:
                            pipe.rpush(applied, cid)
                            await asyncio.sleep(0.01)
                return not entry.duplicate
            except InProgressError:
                await asyncio.sleep(0.005)

    async def main() -> list[bool]:
        client = aioredis.Redis.from_url(REDIS_URL, max_connections=40)
        try:
            ids = [f"t{i % 5}" for i in range(20)]
            return list(await asyncio.gather(*(worker(client, cid) for cid in ids)))
        finally:
            await client.aclose()

    fresh = asyncio.run(main())
    assert sum(fresh) == 5
    assert sorted(redis_client.lrange(applied, 0, -1)) == [f"t{i}".encode() for i in range(5)]
