"""RD7: every way to misuse the Redis inbox fails with a clear error and
applies nothing: wrong objects, a pipeline executed inside the block,
settings, and, on a cluster, a key in another hash slot."""

from __future__ import annotations

import contextlib
import datetime as dt
from typing import Any

import pytest

from inboxguard import ConfigurationError, InProgressError, RedisInbox
from tests.redis.conftest import DAY


def _box(client: Any, prefix: str, **options: Any) -> RedisInbox:
    return RedisInbox(client, retention=DAY, key_prefix=prefix, **options)


def test_rd7_wrong_objects_are_refused(redis_client: Any, key_prefix: str) -> None:
    """A client instead of a pipeline, a pipeline with commands queued or in
    MULTI, a client that is not one: each named, nothing written."""
    box = _box(redis_client, key_prefix)
    with pytest.raises(ConfigurationError, match="needs a transactional redis-py pipeline"):
        with box.guard(redis_client, consumer="c", command_id="x", payload={}):
            pass
    with redis_client.pipeline() as pipe:
        pipe.set(f"{key_prefix}early", 1)
        with pytest.raises(ConfigurationError, match="already has commands queued"):
            with box.guard(pipe, consumer="c", command_id="x", payload={}):
                pass
    with redis_client.pipeline() as pipe:
        pipe.multi()
        with pytest.raises(ConfigurationError, match="in MULTI"):
            with box.guard(pipe, consumer="c", command_id="x", payload={}):
                pass
    with pytest.raises(ConfigurationError, match="sync redis-py client"):
        RedisInbox(object(), retention=DAY)
    with pytest.raises(ConfigurationError, match="sync redis-py client"):
        RedisInbox(redis_client.pipeline(), retention=DAY)
    assert box.lookup("c", "x") is None
    assert redis_client.get(f"{key_prefix}early") is None


@pytest.mark.parametrize(
    ("option", "value", "match"),
    [
        ("key_prefix", "", "key_prefix"),
        ("key_prefix", "app:{x}:", "key_prefix"),
        ("lock_timeout", dt.timedelta(seconds=-1), "lock_timeout"),
        ("lock_timeout", 5, "lock_timeout"),
        ("lease", dt.timedelta(0), "lease"),
        ("clock", "now", "clock"),
    ],
)
def test_rd7_bad_settings_are_refused(
    redis_client: Any, option: str, value: Any, match: str
) -> None:
    """Each unusable setting is named."""
    options: dict[str, Any] = {"key_prefix": "ig:", option: value}
    with pytest.raises(ConfigurationError, match=match):
        RedisInbox(redis_client, retention=DAY, **options)


def test_rd7_executing_inside_the_block_is_an_error(redis_client: Any, key_prefix: str) -> None:
    """pipe.execute() inside the block sends the claim with the writes queued so
    far (they commit together), but the result cannot be stored: the guard
    says so. A reset inside the block discards everything, claim included."""
    box = _box(redis_client, key_prefix)
    with pytest.raises(ConfigurationError, match=r"executed, reset or discarded"):
        with redis_client.pipeline() as pipe:
            with box.guard(pipe, consumer="c", command_id="ex", payload={}) as entry:
                pipe.rpush(f"{key_prefix}applied", "ex")
                pipe.execute()
                entry.result = "lost"
    record = box.lookup("c", "ex")
    assert record is not None
    assert record.result is None
    assert redis_client.lrange(f"{key_prefix}applied", 0, -1) == [b"ex"]
    with pytest.raises(ConfigurationError, match=r"executed, reset or discarded"):
        with redis_client.pipeline() as pipe:
            with box.guard(pipe, consumer="c", command_id="rs", payload={}):
                pipe.rpush(f"{key_prefix}applied", "rs")
                pipe.reset()
    assert box.lookup("c", "rs") is None
    assert redis_client.lrange(f"{key_prefix}applied", 0, -1) == [b"ex"]
    # The lease was given back: the redelivery is fresh at once.
    with redis_client.pipeline() as pipe:
        with box.guard(pipe, consumer="c", command_id="rs", payload={}) as entry:
            assert not entry.duplicate


def test_rd7_a_key_in_another_slot_is_refused_before_exec(
    redis_client: Any, key_prefix: str
) -> None:
    """With the cluster check on, a write outside the command's hash slot is
    refused before EXEC, naming the key and how to tag it; keys tagged like
    the command (the tag in its ID) commit."""
    box = _box(redis_client, key_prefix, cluster=True)
    with pytest.raises(ConfigurationError) as caught:
        with redis_client.pipeline() as pipe:
            with box.guard(pipe, consumer="c", command_id="{acct-1}:o1", payload={}):
                pipe.incrby(f"{key_prefix}balance:{{acct-1}}", 5)
                pipe.incrby(f"{key_prefix}balance:{{acct-2}}", 5)
    text = str(caught.value)
    assert f"{key_prefix}balance:{{acct-2}}" in text
    assert "command_id='{acct-42}:t-1'" in text
    assert "CROSSSLOT" in text
    assert redis_client.get(f"{key_prefix}balance:{{acct-1}}") is None
    assert box.lookup("c", "{acct-1}:o1") is None
    with redis_client.pipeline() as pipe:
        with box.guard(pipe, consumer="c", command_id="{acct-1}:o1", payload={}):
            pipe.incrby(f"{key_prefix}balance:{{acct-1}}", 5)
            pipe.rpush(f"{key_prefix}log:{{acct-1}}", "o1")
    assert redis_client.get(f"{key_prefix}balance:{{acct-1}}") == b"5"
    assert box.lookup("c", "{acct-1}:o1") is not None
    # Without a tag in the ID, the inbox's own keys are tagged by a hash of
    # the command: a user key is then in another slot, and the error says to
    # put the tag in the command ID.
    with pytest.raises(ConfigurationError, match=r"command_id='\{acct-42\}:t-1'"):
        with redis_client.pipeline() as pipe:
            with box.guard(pipe, consumer="c", command_id="o2", payload={}):
                pipe.incrby(f"{key_prefix}balance:{{acct-1}}", 5)
    with pytest.raises(ConfigurationError, match="hash_tag must be"):
        with redis_client.pipeline() as pipe:
            with box.guard(pipe, consumer="c", command_id="o3", payload={}, hash_tag="a}b"):
                pass


def test_rd7_a_command_failing_inside_exec_is_reported(redis_client: Any, key_prefix: str) -> None:
    """Redis does not roll back an EXEC whose command fails at run time (INCRBY
    on a list): the claim and the other writes stay applied, the error reaches
    the caller, and the redelivery is a duplicate (never applied twice)."""
    box = _box(redis_client, key_prefix)
    redis_client.rpush(f"{key_prefix}not-a-number", "x")
    with pytest.raises(Exception, match=r"WRONGTYPE|not an integer"):
        with redis_client.pipeline() as pipe:
            with box.guard(pipe, consumer="c", command_id="rt", payload={}):
                pipe.rpush(f"{key_prefix}applied", "rt")
                pipe.incrby(f"{key_prefix}not-a-number", 1)
    assert redis_client.lrange(f"{key_prefix}applied", 0, -1) == [b"rt"]
    with redis_client.pipeline() as pipe:
        with box.guard(pipe, consumer="c", command_id="rt", payload={}) as entry:
            assert entry.duplicate


def test_rd7_a_command_refused_when_queued_applies_nothing(
    redis_client: Any, key_prefix: str
) -> None:
    """A command the server refuses while queuing (unknown command) aborts the
    whole EXEC: no claim, no write; the lease is given back."""
    box = _box(redis_client, key_prefix)
    with pytest.raises(Exception, match=r"EXECABORT|unknown command"):
        with redis_client.pipeline() as pipe:
            with box.guard(pipe, consumer="c", command_id="q", payload={}):
                pipe.rpush(f"{key_prefix}applied", "q")
                pipe.execute_command("NOSUCHCOMMAND", "x")
    assert redis_client.lrange(f"{key_prefix}applied", 0, -1) == []
    assert box.lookup("c", "q") is None
    assert redis_client.exists(box.keys.command("c", "q").lease) == 0


@pytest.mark.parametrize(
    "options",
    [{"decode_responses": True}, {"protocol": 3}, {"protocol": 3, "decode_responses": True}],
    ids=["decoded", "resp3", "resp3-decoded"],
)
def test_rd7_client_options_change_nothing(options: dict[str, Any], key_prefix: str) -> None:
    """Decoded replies and RESP3 give the same decisions, results and records."""
    import redis

    from inboxguard import PayloadMismatchError
    from tests.conftest import REDIS_URL

    client = redis.Redis.from_url(REDIS_URL, **options)
    box = _box(client, key_prefix, cluster=True)
    tag = box.keys.command("c", "x").tag
    try:
        for _ in range(2):
            with client.pipeline() as pipe:
                with box.guard(pipe, consumer="c", command_id="x", payload={"a": 1}) as entry:
                    if not entry.duplicate:
                        pipe.incrby(f"{key_prefix}{{{tag}}}n", 1)
                        entry.result = [1, "two"]
        assert (entry.duplicate, entry.result) == (True, [1, "two"])
        with pytest.raises(PayloadMismatchError), client.pipeline() as pipe:
            with box.guard(pipe, consumer="c", command_id="x", payload={"a": 2}):
                pass
        (record,) = box.quarantined("c")
        assert record.reason == "payload_mismatch"
        assert box.lookup("c", "x").result == [1, "two"]  # type: ignore[union-attr]
        assert int(client.get(f"{key_prefix}{{{tag}}}n")) == 1
    finally:
        client.close()


def test_rd7_a_pipeline_made_with_transaction_false_still_commits_in_one_exec(
    redis_client: Any, key_prefix: str
) -> None:
    """``client.pipeline(transaction=False)`` does not loosen the promise: the
    guard opens MULTI itself, so claim and writes share one EXEC and racing
    copies apply once."""
    import threading

    box = _box(redis_client, key_prefix)
    outside_multi: list[str] = []

    def deliver(cid: str, barrier: threading.Barrier) -> None:
        pipe = redis_client.pipeline(transaction=False)
        barrier.wait()
        with (
            contextlib.suppress(InProgressError),
            box.guard(pipe, consumer="c", command_id=cid, payload={"n": 1}) as entry,
        ):
            if not pipe.explicit_transaction:
                outside_multi.append(cid)
            if not entry.duplicate:
                pipe.incr(f"{key_prefix}applied:{cid}")

    for n in range(20):
        barrier = threading.Barrier(4)
        threads = [threading.Thread(target=deliver, args=(f"t{n}", barrier)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert outside_multi == []
    counts = [int(redis_client.get(f"{key_prefix}applied:t{n}") or 0) for n in range(20)]
    assert counts == [1] * 20
