"""A Celery app whose task keeps its state in Redis, guarded by a RedisInbox.

Run by test_rd_celery.py as ``celery -A tests.redis.celery_app worker``;
the broker, key prefix and queue come from IG_BROKER, IG_PREFIX and IG_QUEUE.
Each ``transfer`` INCRBYs a total and RPUSHes its command ID, in the guard's
EXEC, through ``inboxguard.current_session()`` (the pipeline).
"""

from __future__ import annotations

import datetime as dt
import os

import redis
from celery import Celery

from inboxguard import RedisInbox, current_session
from inboxguard.adapters.celery import inbox_task
from tests.conftest import REDIS_URL

PREFIX = os.environ.get("IG_PREFIX", "igcelery:")
QUEUE = os.environ.get("IG_QUEUE", "igcelery")

app = Celery("rd_celery", broker=os.environ.get("IG_BROKER", "memory://"))
app.conf.update(
    task_default_queue=QUEUE,
    worker_prefetch_multiplier=4,
    broker_connection_retry_on_startup=True,
)
client = redis.Redis.from_url(REDIS_URL)
inbox = RedisInbox(client, retention=dt.timedelta(days=1), key_prefix=PREFIX)


@inbox_task(inbox, session_factory=lambda: client, command_id="cid", consumer="rd.transfers")
def transfer(cid: str, amount: int) -> int:
    """Add ``amount`` to the total, once per ``cid``."""
    pipe = current_session()
    pipe.incrby(f"{PREFIX}total", amount)
    pipe.rpush(f"{PREFIX}applied", cid)
    return amount
