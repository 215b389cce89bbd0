"""RD9: a real Celery worker (RabbitMQ broker) guards a task whose state is in
Redis with a RedisInbox: every command published twice, with fresh task IDs,
is applied once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from kombu import Connection

from tests.conftest import AMQP_URL, require_service, unique
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]
TASK = "tests.redis.celery_app.transfer"

pytestmark = [pytest.mark.e2e, pytest.mark.rabbitmq]


@pytest.fixture
def queue() -> Any:
    """A RabbitMQ queue of the test's own, deleted afterwards."""
    require_service("rabbitmq")
    name = unique("rdq")
    yield name
    with Connection(AMQP_URL) as conn:
        conn.default_channel.queue_delete(name)


def _ready(conn: Any, name: str) -> int:
    return int(conn.default_channel.queue_declare(name, passive=True).message_count)


def test_rd9_celery_worker_applies_each_command_once(
    redis_client: Any, key_prefix: str, queue: str, tmp_path: Path
) -> None:
    """30 commands, each published twice with its own task ID: one list entry
    per command, the exact total, every message acked."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "IG_BROKER": AMQP_URL,
        "IG_PREFIX": key_prefix,
        "IG_QUEUE": queue,
    }
    log = tmp_path / "worker.log"
    cmd = [
        sys.executable, "-m", "celery", "-A", "tests.redis.celery_app", "worker",
        "-Q", queue, "--pool=prefork", "-c", "2", "--loglevel=INFO",
        "-n", f"{unique('w')}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]  # fmt: skip
    with log.open("ab") as out:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_until(lambda: " ready." in log.read_text(errors="replace"), timeout=60)
        producer = Celery(broker=AMQP_URL)
        commands = [(f"tr-{i}", i + 1) for i in range(30)]
        for cid, amount in commands * 2:
            producer.send_task(
                TASK, kwargs={"cid": cid, "amount": amount}, queue=queue, task_id=str(uuid.uuid4())
            )
        applied = f"{key_prefix}applied"
        wait_until(lambda: redis_client.llen(applied) >= len(commands), timeout=90)
        wait_until(lambda: log.read_text(errors="replace").count(" succeeded in ") >= 60, 60)
        with Connection(AMQP_URL) as conn:
            assert _ready(conn, queue) == 0
        entries = [item.decode() for item in redis_client.lrange(applied, 0, -1)]
        assert sorted(entries) == sorted(cid for cid, _ in commands)
        assert int(redis_client.get(f"{key_prefix}total")) == sum(a for _, a in commands)
        text = log.read_text(errors="replace")
        assert text.count("already processed; skipped") == len(commands)
    finally:
        # SIGKILL: the test is over and judges nothing by the worker's shutdown
        # (a warm one took seconds).
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
