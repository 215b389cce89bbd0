"""Fixtures for the Dramatiq adapter: real ``dramatiq`` worker processes of the
reference app (integrations/dramatiq), real brokers and PostgreSQL."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from integrations.dramatiq.brokers import make_broker
from integrations.dramatiq.model import create_schema, drop_schema
from integrations.dramatiq.settings import Settings
from tests.conftest import AMQP_URL, REDIS_URL, require_service, unique

ROOT = Path(__file__).resolve().parents[3]
DRAMATIQ = str(Path(sys.executable).with_name("dramatiq"))
READY = "Worker process is ready for action."
BROKER_URLS = {"redis": REDIS_URL, "rabbitmq": AMQP_URL.rstrip("/") + "/%2F"}


def wait_until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    """Poll ``predicate`` until it is truthy; fail with ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


class WorkerProcess:
    """A ``dramatiq integrations.dramatiq.worker`` command and its log."""

    def __init__(self, settings: Settings, log: Path, *, threads: int, processes: int = 1) -> None:
        self.log = log
        env = {**os.environ, **settings.env(), "PYTHONPATH": str(ROOT)}
        args = [DRAMATIQ, "integrations.dramatiq.worker", "--processes", str(processes)]
        args += ["--threads", str(threads), "--queues", settings.queue]
        self._out = log.open("wb")
        self.proc = subprocess.Popen(
            args,
            cwd=ROOT,
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout: float = 30) -> None:
        wait_until(lambda: READY in self.text() or self.proc.poll() is not None, timeout, "boot")
        if READY not in self.text():
            pytest.fail(f"worker did not boot (exit {self.proc.poll()}):\n{self.text()[-3000:]}")

    def worker_pid(self) -> int:
        """PID of the worker process (the child that runs the actors)."""
        for line in self.text().splitlines():
            if READY in line:
                found = re.search(r"\[PID (\d+)\]", line)
                if found:
                    return int(found.group(1))
        pytest.fail("no ready line with a PID in the worker log")

    def terminate(self, timeout: float = 30) -> None:
        """Stop gracefully: in-flight messages finish, prefetched ones go back."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: self.proc.poll() is not None, timeout, "a graceful worker stop")

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # the command and its worker processes
        self.proc.wait(timeout=10)
        self._out.close()


@pytest.fixture
def engine(pg_url: str) -> Iterator[Engine]:
    """An engine on this session's PostgreSQL database."""
    eng = create_engine(pg_url)
    yield eng
    eng.dispose()


@pytest.fixture(params=["redis", "rabbitmq"])
def broker_name(request: pytest.FixtureRequest) -> str:
    """Each real broker in turn."""
    require_service(request.param)
    return str(request.param)


@pytest.fixture
def app_settings(engine: Engine, pg_url: str, broker_name: str) -> Iterator[Settings]:
    """Settings of the reference app on its own tables and queue; schema created."""
    prefix = unique("dq") + "_"
    settings = Settings(
        db_url=pg_url,
        broker_url=BROKER_URLS[broker_name],
        results_url=REDIS_URL,
        prefix=prefix,
        queue=unique("q"),
        retention_days=45,
        guard=True,
        work_ms=0,
        ack_delay_ms=0,
        redis_heartbeat_ms=60_000,
    )
    create_schema(engine, prefix)
    yield settings
    drop_schema(engine, prefix)


@pytest.fixture
def producer(app_settings: Settings) -> Iterator[object]:
    """A broker the test enqueues with; the test's queues are deleted afterwards."""
    broker = make_broker(app_settings.broker_url)
    yield broker
    _delete_queues(broker, app_settings.queue)
    broker.close()


def pending(broker: Any, queue: str) -> int:
    """Messages of ``queue`` not yet acknowledged or dead-lettered, as far as
    the broker can tell (RabbitMQ: ready ones only; Redis: queued and
    unacknowledged ones, including those of dead workers)."""
    if hasattr(broker, "channel"):
        main, delayed, _dead = broker.get_queue_message_counts(queue)
        return int(main + delayed)
    client, ns = broker.client, broker.namespace
    total = client.llen(f"{ns}:{queue}") + client.llen(f"{ns}:{queue}.DQ")
    for key in client.keys(f"{ns}:__acks__.*"):
        if key.decode().endswith((f".{queue}", f".{queue}.DQ")):
            total += client.scard(key)
    return int(total)


def drain(broker: Any, queue: str, start: Callable[..., WorkerProcess], **changes: Any) -> None:
    """Run workers until every message of ``queue`` is acknowledged.

    A queue is drained when it is empty *after* every consumer stopped
    gracefully (stopping hands prefetched and unacknowledged messages back).
    """
    deadline = time.monotonic() + 60
    while True:
        worker = start(**changes)
        worker.wait_ready()
        wait_until(lambda: pending(broker, queue) == 0, 60, f"queue {queue} to empty")
        worker.terminate()
        if pending(broker, queue) == 0:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"queue {queue} still holds {pending(broker, queue)} messages")


def _delete_queues(broker: object, queue: str) -> None:
    if hasattr(broker, "channel"):  # RabbitMQ
        for name in (queue, f"{queue}.DQ", f"{queue}.XQ"):
            broker.channel.queue_delete(name)
    else:
        client, ns = broker.client, broker.namespace
        keys = client.keys(f"{ns}:{queue}*")
        keys += [k for k in client.keys(f"{ns}:__acks__.*") if queue in k.decode()]
        if keys:
            client.delete(*keys)


@pytest.fixture
def start_worker(app_settings: Settings, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Start reference-app workers; every one is killed at the end of the test."""
    started: list[WorkerProcess] = []

    def start(threads: int = 4, processes: int = 1, **changes: object) -> WorkerProcess:
        settings = dataclasses.replace(app_settings, **changes)
        log = tmp_path / f"worker{len(started)}.log"
        worker = WorkerProcess(settings, log, threads=threads, processes=processes)
        started.append(worker)
        return worker

    try:
        yield start
    finally:
        for worker in started:
            worker.stop()
