"""RD9: the kombu and Dramatiq adapters take a RedisInbox with a Redis client
factory in place of session_factory; redelivered commands apply once and a
mismatch is quarantined in Redis. (Celery: test_rd_celery.py.)"""

from __future__ import annotations

import datetime as dt
from typing import Any

import dramatiq
import pytest
from dramatiq import Worker
from dramatiq.brokers.stub import StubBroker
from kombu import Connection, Consumer, Producer, Queue
from kombu.message import Message

from inboxguard import (
    BeyondRetentionError,
    ConfigurationError,
    RedisInbox,
    RetentionPolicy,
    current_session,
)
from inboxguard.adapters.dramatiq import InboxMiddleware
from inboxguard.adapters.kombu import guarded
from tests.redis.conftest import DAY


def test_rd9_kombu_callback_applies_once_and_quarantines_a_mismatch(
    redis_client: Any, key_prefix: str
) -> None:
    """On kombu's in-memory transport: the same command delivered twice is
    applied once; another payload under its ID is quarantined, not applied."""
    box = RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix)
    applied = f"{key_prefix}applied"

    def handler(body: dict[str, Any], message: Message) -> None:
        pipe = current_session()
        pipe.rpush(applied, f"{body['command_id']}:{body['amount']}")

    callback = guarded(
        handler,
        box,
        session_factory=lambda: redis_client,
        command_id="command_id",
        consumer="payments",
    )
    queue = Queue(key_prefix + "pay")
    bodies = [
        {"command_id": "p1", "amount": 4},
        {"command_id": "p1", "amount": 4},
        {"command_id": "p1", "amount": 5},
    ]
    with Connection("memory://") as conn:
        for body in bodies:
            Producer(conn).publish(body, routing_key=queue.name, declare=[queue], serializer="json")
        with Consumer(conn, queues=[queue], callbacks=[callback], accept=["json"]):
            for _ in bodies:
                conn.drain_events(timeout=5)
    assert redis_client.lrange(applied, 0, -1) == [b"p1:4"]
    (record,) = box.quarantined("payments")
    assert (record.command_id, record.reason) == ("p1", "payload_mismatch")


def test_rd9_dramatiq_actor_applies_each_command_once(redis_client: Any, key_prefix: str) -> None:
    """A guarded actor on Dramatiq's StubBroker with the state in Redis: every
    command sent three times is applied once."""
    policy = RetentionPolicy(replay=dt.timedelta(days=60))  # covers Dramatiq's retries
    box = RedisInbox(redis_client, retention=policy, key_prefix=key_prefix)
    broker = StubBroker()
    broker.emit_after("process_boot")
    broker.add_middleware(InboxMiddleware(box, session_factory=lambda: redis_client))
    applied = f"{key_prefix}applied"

    @dramatiq.actor(broker=broker, inbox_command_id="cid", inbox_consumer="rd.actor")
    def add(cid: str, amount: int) -> None:
        pipe = current_session()
        pipe.incrby(f"{key_prefix}total", amount)
        pipe.rpush(applied, cid)

    worker = Worker(broker, worker_timeout=50, worker_threads=2)
    worker.start()
    try:
        for _ in range(3):
            for i in range(10):
                add.send(f"c{i}", i)
        broker.join(add.queue_name)
        worker.join()
    finally:
        worker.stop()
    expected = sorted(f"c{i}".encode() for i in range(10))
    assert sorted(redis_client.lrange(applied, 0, -1)) == expected
    assert int(redis_client.get(f"{key_prefix}total")) == sum(range(10))


def test_rd9_dramatiq_refuses_async_actors_on_a_redis_inbox(
    redis_client: Any, key_prefix: str
) -> None:
    """Async actors are guarded through SQLAlchemy's AsyncSession only: a
    RedisInbox with an async_session_factory is refused at construction."""
    box = RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix)
    with pytest.raises(ConfigurationError, match="async actors"):
        InboxMiddleware(
            box, session_factory=lambda: redis_client, async_session_factory=lambda: None
        )
    with pytest.raises(ConfigurationError, match=r"inboxguard.Inbox or inboxguard.RedisInbox"):
        InboxMiddleware(object(), session_factory=lambda: redis_client)  # type: ignore[arg-type]


def test_rd9_handler_decorator_runs_once_and_returns_the_stored_result(
    redis_client: Any, key_prefix: str
) -> None:
    """RedisInbox.handler: fn(pipe, ...) runs once per command; a duplicate
    returns the stored result without running it."""
    box = RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix)
    runs: list[str] = []

    @box.handler(consumer="h", command_id="cid")
    def credit(pipe: Any, cid: str, amount: int) -> dict[str, int]:
        runs.append(cid)
        pipe.incrby(f"{key_prefix}total", amount)
        return {"credited": amount}

    for _ in range(2):
        with redis_client.pipeline() as pipe:
            assert credit(pipe, "h-1", 4) == {"credited": 4}
    assert runs == ["h-1"]
    assert redis_client.get(f"{key_prefix}total") == b"4"


def test_rd9_handler_sent_at_refuses_a_replay_older_than_the_horizon(
    redis_client: Any, key_prefix: str
) -> None:
    """RedisInbox.handler(sent_at=...): as Inbox.handler, a message sent before
    the evidence horizon is quarantined and refused, fn not run, no evidence;
    one sent inside it runs."""
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    box = RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix, clock=lambda: now)
    runs: list[str] = []

    @box.handler(consumer="h", command_id="cid", sent_at="sent")
    def credit(pipe: Any, cid: str, sent: dt.datetime) -> str:
        runs.append(cid)
        pipe.incrby(f"{key_prefix}total", 1)
        return cid

    with redis_client.pipeline() as pipe, pytest.raises(BeyondRetentionError):
        credit(pipe, "old", now - dt.timedelta(days=2))
    assert runs == []
    assert box.lookup("h", "old") is None
    [record] = box.quarantine_records_of("h", "old")
    assert record.reason == "beyond_retention"
    with redis_client.pipeline() as pipe:
        assert credit(pipe, "new", now - dt.timedelta(hours=1)) == "new"
    assert runs == ["new"]
