"""Real ``celery worker`` processes of the reference app, and what the brokers hold."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from kombu import Connection
from sqlalchemy import create_engine, func, select
from sqlalchemy.engine import Engine

from integrations.celery import business
from integrations.celery.producer import Command, publish
from integrations.celery.settings import (
    Settings,
    create_app,
    dead_letter_queue,
    declare_dead_letter,
)
from tests.conftest import AMQP_URL, REDIS_URL, require_service, unique

REPO = Path(__file__).resolve().parents[3]
BROKERS = {"redis": REDIS_URL, "rabbitmq": AMQP_URL}


def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


class Worker:
    """One ``celery -A integrations.celery.app worker`` process group."""

    def __init__(
        self,
        settings: Settings,
        log: Path,
        *,
        concurrency: int = 2,
        app: str = "integrations.celery.app",
        env: dict[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.log_path = log
        self.concurrency = concurrency
        self.app = app
        self.extra_env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *, wait_ready: bool = True) -> Worker:
        env = {**os.environ, **self.settings.env(), **self.extra_env, "PYTHONPATH": str(REPO)}
        cmd = [
            sys.executable, "-m", "celery", "-A", self.app, "worker",
            "-Q", self.settings.queue, "--pool=prefork", "-c", str(self.concurrency),
            "--loglevel=INFO", "-n", f"{unique('w')}@%h",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
        ]  # fmt: skip
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        if wait_ready:
            wait_until(self.ready, 30, f"worker ready; log:\n{self.log()[-3000:]}")
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            pytest.fail(f"worker exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
        return " ready." in self.log()

    def children(self) -> list[int]:
        assert self.proc is not None
        path = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        return [int(pid) for pid in path.read_text().split()] if path.exists() else []

    def kill_child(self) -> int:
        """SIGKILL one prefork child (the parent sees WorkerLostError)."""
        child = wait_until(self.children, 10, "a prefork child")[0]
        os.kill(child, signal.SIGKILL)
        return int(child)

    def kill(self) -> None:
        """SIGKILL the whole worker: parent and children, no shutdown at all."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def discard(self) -> None:
        """SIGKILL the worker's process group if it still runs: for a test that is
        over, which judges nothing by the shutdown (a warm one took 2-4 s)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.kill()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@dataclasses.dataclass
class Reference:
    """The reference app wired to one test's tables, queue and broker."""

    settings: Settings
    engine: Engine
    tmp: Path
    workers: list[Worker] = dataclasses.field(default_factory=list)

    def worker(
        self,
        *,
        concurrency: int = 2,
        start: bool = True,
        app: str = "integrations.celery.app",
        env: dict[str, str] | None = None,
        **overrides: Any,
    ) -> Worker:
        """A worker process of ``app``; ``overrides`` change its settings only
        (``hang_in_body=...``), ``env`` adds environment variables."""
        log = self.tmp / f"worker{len(self.workers)}.log"
        settings = dataclasses.replace(self.settings, **overrides)
        worker = Worker(settings, log, concurrency=concurrency, app=app, env=env)
        self.workers.append(worker)
        return worker.start() if start else worker

    def publish(self, items: list[Command]) -> int:
        app = create_app(self.settings, include_tasks=False)
        try:
            declare_dead_letter(app, self.settings)
            return publish(app, self.settings, items)
        finally:
            app.close()

    def check(self) -> business.LedgerCheck:
        return business.check(self.engine, self.settings.table_prefix)

    def inbox(self) -> Any:
        return business.make_inbox(
            self.engine, self.settings.table_prefix, self.settings.retention,
            self.settings.lock_timeout,
        )  # fmt: skip

    def applied(self, transfer_id: str) -> int:
        """Ledger rows of one transfer."""
        ledger = business.tables(self.settings.table_prefix).ledger
        with self.engine.connect() as conn:
            query = select(func.count()).where(ledger.c.transfer_id == transfer_id)
            return int(conn.execute(query).scalar_one())

    def ready_messages(self) -> int:
        """Messages waiting in the work queue (not counting unacked deliveries)."""
        if self.settings.is_rabbitmq:
            with Connection(self.settings.broker_url) as conn:
                ok = conn.default_channel.queue_declare(self.settings.queue, passive=True)
                return int(ok.message_count)
        client = redis.Redis.from_url(self.settings.broker_url)
        return int(client.llen(self.settings.redis_keyprefix + self.settings.queue))

    def dead_letters(self) -> list[Any]:
        """The argument lists of the messages in the dead-letter queue (RabbitMQ),
        taken off it."""
        found = []
        with Connection(self.settings.broker_url) as conn:
            dead = dead_letter_queue(self.settings)(conn.default_channel)
            dead.declare()
            while (message := dead.get(no_ack=True)) is not None:
                found.append(message.decode()[0])
        return found

    def redis_unacked(self) -> int:
        """Deliveries kombu's Redis transport holds for redelivery (not yet acked)."""
        client = redis.Redis.from_url(self.settings.broker_url)
        return int(client.hlen(f"{self.settings.redis_keyprefix}unacked"))


def _cleanup_broker(settings: Settings) -> None:
    if settings.is_rabbitmq:
        with Connection(settings.broker_url) as conn:
            channel = conn.default_channel
            for queue in (settings.queue, f"{settings.queue}.dead"):
                channel.queue_delete(queue)
            for exchange in (settings.queue, f"{settings.queue}.dlx"):
                channel.exchange_delete(exchange)
        return
    client = redis.Redis.from_url(settings.broker_url)
    keys = list(client.scan_iter(match=f"{settings.redis_keyprefix}*"))
    if keys:
        client.delete(*keys)


@pytest.fixture
def reference(pg_url: str, prefix: str, tmp_path: Path) -> Iterator[Callable[..., Reference]]:
    """Factory: ``reference("redis", task_delay=0.05)`` -> a Reference with its schema."""
    made: list[Reference] = []

    def make(broker: str, **overrides: Any) -> Reference:
        require_service("postgresql")
        require_service(broker)
        queue = unique("igq")
        options: dict[str, Any] = {
            "retention": dt.timedelta(days=7),
            "redis_keyprefix": f"{queue}:",
            **overrides,
        }
        settings = Settings(
            db_url=pg_url, broker_url=BROKERS[broker], table_prefix=prefix, queue=queue, **options
        )
        engine = create_engine(pg_url)
        business.create_schema(engine, prefix, settings.retention)
        ref = Reference(settings, engine, tmp_path)
        made.append(ref)
        return ref

    yield make
    for ref in made:
        for worker in ref.workers:
            worker.discard()
        _cleanup_broker(ref.settings)
        business.drop_schema(ref.engine, ref.settings.table_prefix, ref.settings.retention)
        ref.engine.dispose()
