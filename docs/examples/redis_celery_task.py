"""A Celery task whose state lives in Redis, guarded by a RedisInbox.

``session_factory`` returns the Redis client; the adapter opens a pipeline of
it per delivery and the task body reaches it with ``current_session()``.
Run: python docs/examples/redis_celery_task.py (runs the task in-process with
``apply()``; a worker runs it the same way).
"""

# needs: redis

from __future__ import annotations

import datetime as dt
import os
import uuid

import redis
from celery import Celery

from inboxguard import RedisInbox, current_session
from inboxguard.adapters.celery import inbox_task

URL = os.environ.get("INBOXGUARD_REDIS_URL", "redis://127.0.0.1:6379/0")

app = Celery("credits", broker="memory://")
client = redis.Redis.from_url(URL)


def build(prefix: str) -> object:
    """Declare the guarded task on an inbox of its own key prefix."""
    inbox = RedisInbox(client, retention=dt.timedelta(days=7), key_prefix=prefix)

    @inbox_task(inbox, session_factory=lambda: client, command_id="cid", consumer="credits")
    def credit(cid: str, amount: int) -> int:
        pipe = current_session()  # the pipeline: queue writes, never execute()
        pipe.incrby(f"{prefix}balance", amount)
        return amount

    return credit


def main() -> None:
    """Deliver one command twice, then delete the sample's keys."""
    try:
        client.ping()
    except redis.ConnectionError:
        print(f"no Redis at {URL}; nothing to show")
        return
    prefix = f"example-{uuid.uuid4().hex[:8]}:"
    credit = build(prefix)
    try:
        for _ in range(2):  # the second delivery is a duplicate
            credit.apply(kwargs={"cid": "c-1", "amount": 10})  # type: ignore[attr-defined]
        assert client.get(f"{prefix}balance") == b"10"
    finally:
        for key in client.scan_iter(match=prefix + "*"):
            client.delete(key)


if __name__ == "__main__":
    main()
