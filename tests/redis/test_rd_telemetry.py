"""RD13: the Redis guard records what the SQL guard records, through the same
telemetry: ``inboxguard.claims`` by outcome with its duration, and the claim,
handler and commit (``EXEC``) spans; ``telemetry=False`` records nothing."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

import inboxguard
from tests.conftest import REDIS_URL
from tests.redis.conftest import DAY
from tests.telemetry.conftest import Sdk


@pytest.fixture
def sdk() -> Iterator[Sdk]:
    from inboxguard._telemetry import _otel

    made = Sdk()
    made.install()
    yield made
    _otel.reset()
    made.meters.shutdown()
    made.tracers.shutdown()


def _run(box: inboxguard.RedisInbox, client: Any, cid: str, payload: object, **kw: Any) -> bool:
    """One guarded command; True when its block queued the write (fresh)."""
    with client.pipeline() as pipe:
        with box.guard(pipe, consumer="pay", command_id=cid, payload=payload, **kw) as entry:
            if not entry.duplicate:
                pipe.rpush(f"{box.key_prefix}applied", cid)
            return not entry.duplicate


def test_rd13_claims_counted_by_outcome_with_claim_handler_and_commit_spans(
    sdk: Sdk, redis_client: Any, key_prefix: str
) -> None:
    box = inboxguard.RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix)
    assert _run(box, redis_client, "c1", {"a": 1})
    assert inboxguard.current_entry().duplicate is False
    assert not _run(box, redis_client, "c1", {"a": 1})
    assert inboxguard.current_entry().duplicate is True
    with pytest.raises(inboxguard.PayloadMismatchError):
        _run(box, redis_client, "c1", {"a": 2})
    old = dt.datetime.now(dt.UTC) - 3 * DAY
    with pytest.raises(inboxguard.BeyondRetentionError):
        _run(box, redis_client, "c2", {"a": 1}, sent_at=old)
    for outcome in ("fresh", "duplicate", "mismatch", "beyond_retention"):
        assert sdk.total("inboxguard.claims", consumer="pay", outcome=outcome) == 1, outcome
    assert sdk.total("inboxguard.claim.duration", consumer="pay") == 4
    claims = sdk.spans("inboxguard.claim")
    assert sorted(s.attributes["inboxguard.outcome"] for s in claims) == [
        "beyond_retention",
        "duplicate",
        "fresh",
        "mismatch",
    ]
    for name in ("inboxguard.handler", "inboxguard.commit"):
        spans = sdk.spans(name)
        assert [s.attributes["inboxguard.outcome"] for s in spans] == ["fresh", "duplicate"], name
        assert {s.attributes["inboxguard.command_id"] for s in spans} == {"c1"}
    assert redis_client.lrange(f"{key_prefix}applied", 0, -1) == [b"c1"]


def test_rd13_a_held_lease_counts_in_progress(sdk: Sdk, redis_client: Any, key_prefix: str) -> None:
    box = inboxguard.RedisInbox(
        redis_client,
        retention=DAY,
        key_prefix=key_prefix,
        lock_timeout=dt.timedelta(milliseconds=60),
    )
    with redis_client.pipeline() as holder:
        with box.guard(holder, consumer="pay", command_id="busy", payload={}) as entry:
            assert not entry.duplicate
            with pytest.raises(inboxguard.InProgressError):
                _run(box, redis_client, "busy", {})
    assert sdk.total("inboxguard.claims", outcome="in_progress") == 1
    assert sdk.total("inboxguard.claims", outcome="fresh") == 1


async def _async_guard(prefix: str) -> list[bool]:
    import redis
    import redis.asyncio

    box = inboxguard.RedisInbox(redis.Redis.from_url(REDIS_URL), retention=DAY, key_prefix=prefix)
    client = redis.asyncio.Redis.from_url(REDIS_URL)
    flags = []
    try:
        for _ in range(2):
            async with client.pipeline() as pipe:
                async with box.guard_async(pipe, consumer="a", command_id="x", payload={}):
                    pass
            flags.append(inboxguard.current_entry().duplicate)
    finally:
        await client.aclose()
        box.client.close()
    return flags


def test_rd13_the_asyncio_guard_reports_the_same(sdk: Sdk, key_prefix: str) -> None:
    assert asyncio.run(_async_guard(key_prefix)) == [False, True]
    assert sdk.total("inboxguard.claims", consumer="a", outcome="fresh") == 1
    assert sdk.total("inboxguard.claims", consumer="a", outcome="duplicate") == 1
    assert len(sdk.spans("inboxguard.handler")) == 2
    assert len(sdk.spans("inboxguard.commit")) == 2


def test_rd13_telemetry_false_records_nothing(sdk: Sdk, redis_client: Any, key_prefix: str) -> None:
    box = inboxguard.RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix, telemetry=False)
    assert _run(box, redis_client, "c1", {})
    assert not _run(box, redis_client, "c1", {})
    assert sdk.points("inboxguard.claims") == []
    assert sdk.spans() == []
    with pytest.raises(inboxguard.ConfigurationError, match="telemetry must be True or False"):
        inboxguard.RedisInbox(redis_client, retention=DAY, telemetry="false")  # type: ignore[arg-type]
