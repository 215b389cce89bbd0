"""RD15: a Redis command's identity is (consumer, command ID) and nothing else.

The keys' hash tag is read from the command ID (``"{acct-42}:t-1"``), so
every delivery of one command finds the same evidence: with the tag passed
again or left out it is a duplicate, and with another payload a mismatch.
A ``hash_tag`` that is not the ID's own tag is refused before anything is
sent, naming the fix, so the same command can never be stored under two
tags and applied twice.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from inboxguard import ConfigurationError, PayloadMismatchError, RedisInbox

DAY = dt.timedelta(days=1)


@pytest.fixture(params=[False, True], ids=["standalone", "cluster-check"])
def box(request: pytest.FixtureRequest, redis_client: Any, key_prefix: str) -> RedisInbox:
    """A Redis inbox, with and without the cluster slot check."""
    return RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix, cluster=request.param)


@pytest.fixture
def plain(redis_client: Any, key_prefix: str) -> RedisInbox:
    """A Redis inbox without the slot check (an untagged command may then
    write the tagged balance, as a single server allows)."""
    return RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix, cluster=False)


def _deliver(client: Any, box: RedisInbox, cid: str, payload: object, **tag: str) -> bool:
    """One delivery that adds 1 to the account's balance; True when it ran."""
    with client.pipeline() as pipe:
        with box.guard(pipe, consumer="ledger", command_id=cid, payload=payload, **tag) as e:
            if not e.duplicate:
                pipe.incrby(f"{box.key_prefix}balance:{{acct-1}}", 1)
    return not e.duplicate


def test_rd15_the_tag_in_the_id_with_or_without_hash_tag_is_one_command(
    redis_client: Any, box: RedisInbox
) -> None:
    cid = "{acct-1}:t-1"
    assert _deliver(redis_client, box, cid, {"n": 1}, hash_tag="acct-1")
    assert not _deliver(redis_client, box, cid, {"n": 1})
    assert not _deliver(redis_client, box, cid, {"n": 1}, hash_tag="acct-1")
    with pytest.raises(PayloadMismatchError):
        _deliver(redis_client, box, cid, {"n": 2})
    assert redis_client.get(f"{box.key_prefix}balance:{{acct-1}}") == b"1"
    assert [r.command_id for r in box.quarantined("ledger")] == [cid]


@pytest.mark.parametrize("tags", [("acct-1", "acct-2"), ("acct-1", None), (None, "acct-1")])
def test_rd15_a_tag_outside_the_command_id_is_refused(
    redis_client: Any, plain: RedisInbox, tags: tuple[str | None, str | None]
) -> None:
    """The same command delivered with two different tags (or one and none)
    never runs twice: a tag that is not the ID's is refused, naming the fix,
    and nothing is written."""
    box = plain
    ran = 0
    for tag in tags:
        if tag is None:
            ran += _deliver(redis_client, box, "t-9", {"n": 1})
            continue
        with pytest.raises(ConfigurationError) as refused:
            _deliver(redis_client, box, "t-9", {"n": 1}, hash_tag=tag)
        assert f"command_id='{{{tag}}}:t-9'" in str(refused.value)
    # Only the delivery without a tag ran; every tagged one was refused.
    untagged = None in tags
    assert ran == (1 if untagged else 0)
    balance = redis_client.get(f"{box.key_prefix}balance:{{acct-1}}")
    assert balance == (b"1" if untagged else None)
    with pytest.raises(ConfigurationError, match="not part of command ID"):
        box.lookup("ledger", "t-9", hash_tag="acct-1")
    assert (box.lookup("ledger", "t-9") is not None) is untagged


def test_rd15_a_tag_derived_from_the_payload_cannot_hide_a_mismatch(
    redis_client: Any, plain: RedisInbox
) -> None:
    """A consumer that tags by a payload field: with the tag outside the ID,
    a changed payload is refused at once; with the tag in the ID, a changed
    payload under the same ID is a mismatch, quarantined."""
    box = plain
    with pytest.raises(ConfigurationError):
        _deliver(redis_client, box, "t-5", {"acct": "acct-1"}, hash_tag="acct-1")
    assert _deliver(redis_client, box, "t-5", {"acct": "acct-1"})
    with pytest.raises(ConfigurationError):
        _deliver(redis_client, box, "t-5", {"acct": "acct-2"}, hash_tag="acct-2")
    with pytest.raises(PayloadMismatchError):
        _deliver(redis_client, box, "t-5", {"acct": "acct-2"})
    assert redis_client.get(f"{box.key_prefix}balance:{{acct-1}}") == b"1"
