"""The Redis store: :class:`inboxguard.RedisInbox` on the local server, with a
key prefix of its own; the mutation is an INCRBY and an LPUSH in the guard's
EXEC."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from inboxguard import RedisInbox, RetentionPolicy
from inboxguard._core.clock import Clock
from inboxguard.testing.conformance import SHORT_LOCK_TIMEOUT, run_in_threads
from tests.conftest import REDIS_URL, require_service, unique

__all__ = ["RedisStore", "redis_store"]


class RedisStore:
    """A RedisInbox and the consumer's own keys under one prefix."""

    name = "redis"

    def __init__(self, client: Any, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.total = f"{prefix}total"
        self.applied_key = f"{prefix}applied"
        self._inboxes: list[RedisInbox] = []

    def inbox(self, *, retention: RetentionPolicy, clock: Clock | None = None) -> RedisInbox:
        """A RedisInbox on this store's prefix."""
        box = RedisInbox(
            self.client,
            retention=retention,
            key_prefix=self.prefix,
            lock_timeout=SHORT_LOCK_TIMEOUT,
            clock=clock,
        )
        self._inboxes.append(box)
        return box

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A transactional pipeline; the guard sends its EXEC, an exception discards it."""
        with self.client.pipeline(transaction=True) as pipe:
            yield pipe
            if len(pipe):  # writes queued outside a guard
                pipe.execute()

    def guard(
        self,
        inbox: RedisInbox,
        tx: Any,
        *,
        consumer: str,
        command_id: str,
        payload: Any,
        sent_at: dt.datetime | None = None,
    ) -> Any:
        """``RedisInbox.guard`` on the pipeline."""
        return inbox.guard(
            tx, consumer=consumer, command_id=command_id, payload=payload, sent_at=sent_at
        )

    def guard_batch(
        self, inbox: RedisInbox, tx: Any, *, consumer: str, commands: list[tuple[str, Any]]
    ) -> Any:
        """``guard_batch`` on the transaction (refused where the store says so)."""
        return inbox.guard_batch(tx, consumer=consumer, commands=commands)

    def mutate(self, tx: Any, command_id: str, amount: int) -> None:
        """INCRBY the total and RPUSH the command ID, queued in the pipeline."""
        tx.incrby(self.total, amount)
        tx.rpush(self.applied_key, command_id)

    def applied(self) -> list[str]:
        """The command IDs pushed by committed mutations, in order."""
        return [item.decode() for item in self.client.lrange(self.applied_key, 0, -1)]

    def evidence(self, consumer: str, command_id: str) -> dict[str, Any] | None:
        """The committed evidence hash, decoded."""
        record = self._any_inbox().lookup(consumer, command_id)
        if record is None:
            return None
        return {"digest": record.digest, "result": record.result, "expires_at": record.expires_at}

    def quarantine(self, consumer: str, command_id: str) -> list[dict[str, Any]]:
        """Every quarantine record of the command, whatever its status."""
        return [
            {
                "reason": r.reason,
                "incoming_digest": r.incoming_digest,
                "stored_digest": r.stored_digest,
                "occurrences": r.occurrences,
            }
            for r in self._any_inbox().quarantined(consumer, status=None)
            if r.command_id == command_id
        ]

    def run_concurrently(self, n: int, fn: Callable[[], Any]) -> list[Any | BaseException]:
        """Threads, each pipeline with a connection of its own from the pool."""
        return run_in_threads(n, fn)

    def _any_inbox(self) -> RedisInbox:
        if self._inboxes:
            return self._inboxes[0]
        return self.inbox(retention=RetentionPolicy(dead_letter_replay=dt.timedelta(days=1)))

    def drop(self) -> None:
        """Delete every key of the prefix."""
        self._any_inbox().drop_keys()


@contextmanager
def redis_store(request: pytest.FixtureRequest) -> Iterator[RedisStore]:
    """The Redis store on a key prefix of its own."""
    del request
    require_service("redis")
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    store = RedisStore(client, unique("ig") + ":")
    try:
        yield store
    finally:
        store.drop()
        client.close()
