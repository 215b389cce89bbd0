"""RD10: what operators read and settle in a Redis inbox: stats per consumer,
explain, and the quarantine (list, show, resolve, release, replay)."""

from __future__ import annotations

from typing import Any

import pytest

from inboxguard import PayloadMismatchError, RedisInbox
from inboxguard.inbox.redis import operations
from tests.conftest import FakeClock
from tests.redis.conftest import DAY


def _deliver(box: RedisInbox, client: Any, consumer: str, cid: str, payload: Any) -> None:
    with client.pipeline() as pipe:
        with box.guard(pipe, consumer=consumer, command_id=cid, payload=payload) as entry:
            if not entry.duplicate:
                pipe.rpush(f"{box.key_prefix}applied", cid)


def test_rd10_stats_and_explain(redis_client: Any, key_prefix: str) -> None:
    """Evidence and open records are counted per consumer; explain says
    duplicate or fresh and lists the command's records."""
    clock = FakeClock()
    box = RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix, clock=clock)
    for cid in ("a", "b", "c"):
        _deliver(box, redis_client, "billing", cid, {})
    _deliver(box, redis_client, "shipping", "a", {})
    with pytest.raises(PayloadMismatchError):
        _deliver(box, redis_client, "billing", "a", {"other": 1})
    found = operations.stats(box, clock=clock)
    by_name = {c.consumer: c for c in found.consumers}
    assert (by_name["billing"].processed, by_name["billing"].quarantined) == (3, 1)
    assert (by_name["shipping"].processed, by_name["shipping"].quarantined) == (1, 0)
    assert by_name["billing"].oldest_processed_at == clock.now
    assert found.durability["maxmemory_policy"] == "noeviction"
    told = operations.explain(box, consumer="billing", command_id="a", clock=clock)
    assert told.verdict == "duplicate"
    assert told.evidence is not None
    assert told.evidence.digest in told.summary
    assert [r.reason for r in told.quarantine] == ["payload_mismatch"]
    assert operations.explain(box, consumer="billing", command_id="zz").verdict == "fresh"


def test_rd10_quarantine_resolve_release_and_replay(redis_client: Any, key_prefix: str) -> None:
    """Records survive (no expiry), count repeats, resolve once; a release
    deletes the refusing evidence so the next delivery is processed; a replay
    is recorded and resolves its record."""
    box = RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix)
    _deliver(box, redis_client, "c", "m", {"v": 1})
    for _ in range(2):
        with pytest.raises(PayloadMismatchError):
            _deliver(box, redis_client, "c", "m", {"v": 2})
    (record,) = box.quarantined("c")
    assert record.occurrences == 2
    key = box.keys.quarantine_record + str(record.id)
    assert redis_client.ttl(key) == -1  # kept with no expiry
    assert box.quarantine_record(record.id) == record
    assert box.release_quarantine(record.id, actor="ops", reason="v2 is right")
    assert not box.release_quarantine(record.id, actor="ops", reason="again")
    (action,) = box.quarantine_actions(record.id)
    assert (action.action, action.actor, action.reason) == ("release", "ops", "v2 is right")
    assert action.evidence_digest == record.stored_digest
    assert box.lookup("c", "m") is None
    _deliver(box, redis_client, "c", "m", {"v": 2})  # processed now
    assert redis_client.lrange(f"{key_prefix}applied", 0, -1) == [b"m", b"m"]
    assert box.quarantined("c") == []
    assert box.quarantine_delivery(
        consumer="c", command_id="n", payload={}, reason="retries_exhausted"
    )
    (open_record,) = box.quarantined("c")
    replay = box.record_quarantine_replay(
        open_record, destination="q", replayed_by="ops", reason="fixed", receipt={"id": 7}
    )
    assert (replay.destination, replay.receipt) == ("q", {"id": 7})
    assert box.quarantine_replays(open_record.id) == [replay]
    assert box.quarantined("c") == []
    assert not box.resolve_quarantine(open_record.id)
    assert len(box.quarantined("c", status=None)) == 2
