"""DJ7: the Celery adapter's inbox_task runs with the Django store
(``session_factory=inbox.session``): a real worker of the reference project
(integrations/django) on PostgreSQL and RabbitMQ applies each payment once
through duplicates and racing copies, quarantines and dead-letters a
mismatch, and after a kill -9 between the commit and the ack the redelivery
is a duplicate; each applied payment's outbox row committed with it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from kombu import Connection, Exchange, Queue
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

import inboxguard.adapters.celery  # noqa: F401 - stamps x-inbox-sent-at on publish
from tests.conftest import AMQP_URL, PG_ADMIN_URL, require_service, unique

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql, pytest.mark.rabbitmq]

REPO = Path(__file__).resolve().parents[2]
TASK = "shop.apply_payment"


def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)
    return value


class Project:
    """The reference project on a database and a queue of this module's own."""

    def __init__(self, tmp: Path) -> None:
        self.db = unique("igdj")
        self.queue = unique("igdjq")
        self.tmp = tmp
        self.url = f"{PG_ADMIN_URL}/{self.db}"
        self.env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "INBOXGUARD_DJANGO_DB": self.url.replace("+psycopg", ""),
            "INBOXGUARD_BROKER_URL": AMQP_URL,
            "INBOXGUARD_QUEUE": self.queue,
        }
        self.engine: Engine = create_engine(self.url)
        self.app = Celery(broker=AMQP_URL, set_as_current=False)
        self.workers: list[subprocess.Popen[bytes]] = []

    def manage(self, *args: str) -> None:
        cmd = [sys.executable, "-m", "integrations.django.manage", *args]
        done = subprocess.run(cmd, cwd=REPO, env=self.env, capture_output=True, check=False)
        assert done.returncode == 0, done.stdout + done.stderr

    def worker(self, log: str, **env: str) -> subprocess.Popen[bytes]:
        path = self.tmp / log
        cmd = [
            sys.executable, "-m", "celery", "-A", "integrations.django.tasks", "worker",
            "-Q", self.queue, "--pool=prefork", "-c", "2", "--loglevel=INFO",
            "-n", f"{unique('w')}@%h", "--without-gossip", "--without-mingle",
            "--without-heartbeat",
        ]  # fmt: skip
        with path.open("ab") as out:
            proc = subprocess.Popen(
                cmd, cwd=REPO, env={**self.env, **env}, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.workers.append(proc)
        wait_until(lambda: self._ready(proc, path), 60, f"worker ready ({path})")
        return proc

    @staticmethod
    def _ready(proc: subprocess.Popen[bytes], path: Path) -> bool:
        if proc.poll() is not None:
            pytest.fail(f"worker exited: {path.read_text(errors='replace')[-3000:]}")
        return " ready." in path.read_text(errors="replace")

    def publish(self, items: list[tuple[str, str, int]]) -> None:
        queue = Queue(  # as the project declares it (integrations/django/tasks.py)
            self.queue, Exchange(self.queue, type="direct"), routing_key=self.queue,
            queue_arguments={
                "x-dead-letter-exchange": f"{self.queue}.dlx",
                "x-dead-letter-routing-key": f"{self.queue}.dead",
            },
        )  # fmt: skip
        with self.app.producer_or_acquire() as producer:
            for payment_id, account, amount in items:
                self.app.send_task(
                    TASK, args=[payment_id, account, amount], queue=queue, producer=producer
                )

    def scalar(self, sql: str, **params: Any) -> Any:
        with self.engine.connect() as conn:
            return conn.execute(text(sql), params).scalar_one()

    def settled(self) -> int:
        """Deliveries the workers finished (Celery logs one line per task)."""
        return sum(
            path.read_text(errors="replace").count("] succeeded in ")
            for path in self.tmp.glob("worker*.log")
        )

    def queued(self) -> int:
        with Connection(AMQP_URL) as conn:
            ok = conn.default_channel.queue_declare(self.queue, passive=True)
            return int(ok.message_count)

    def dead_letters(self) -> list[Any]:
        found = []
        with Connection(AMQP_URL) as conn:
            channel = conn.default_channel
            channel.queue_declare(f"{self.queue}.dead", passive=True)
            while (message := channel.basic_get(f"{self.queue}.dead", no_ack=True)) is not None:
                found.append(message.body)
        return found

    def stop(self) -> None:
        for proc in self.workers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    require_service("postgresql")
    require_service("rabbitmq")
    admin = create_engine(f"{PG_ADMIN_URL}/postgres", isolation_level="AUTOCOMMIT")
    ref = Project(tmp_path_factory.mktemp("djcelery"))
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{ref.db}"'))
    try:
        ref.manage("migrate", "--verbosity=0")
        # One worker serves every test; it stops for good after committing kill-1.
        ref.worker("worker0.log", INBOXGUARD_HANG_AFTER_COMMIT="kill-1")
        yield ref
    finally:
        ref.stop()
        ref.engine.dispose()
        with Connection(AMQP_URL) as conn:
            for queue in (ref.queue, f"{ref.queue}.dead"):
                with contextlib.suppress(Exception):  # already gone
                    conn.default_channel.queue_delete(queue)
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{ref.db}" WITH (FORCE)'))
        admin.dispose()


def _payments(ref: Project, prefix: str) -> tuple[int, int]:
    return (
        ref.scalar("SELECT count(*) FROM shop_payment WHERE payment_id LIKE :p", p=f"{prefix}%"),
        ref.scalar(
            "SELECT count(DISTINCT payment_id) FROM shop_payment WHERE payment_id LIKE :p",
            p=f"{prefix}%",
        ),
    )


def test_dj7_duplicates_and_racing_copies_apply_each_payment_once(project: Project) -> None:
    total = 50
    items = [(f"dup-{n}", "acct", n) for n in range(total) for _ in range(3)]
    settled_before = project.settled()
    project.publish(items)
    wait_until(lambda: _payments(project, "dup-")[1] == total, 60, "every payment applied")
    wait_until(lambda: project.queued() == 0, 30, "the queue drained")
    evidence = "SELECT count(*) FROM inboxguard_inbox WHERE command_id LIKE 'dup-%'"
    wait_until(lambda: project.scalar(evidence) == total, 30, "all evidence")
    # Every copy settled (a late one in flight would show up as an extra row).
    wait_until(lambda: project.settled() - settled_before >= len(items), 60, "every copy settled")
    assert _payments(project, "dup-") == (total, total)
    receipts = "SELECT count(*) FROM inboxguard_outbox WHERE command_id LIKE 'receipt:dup-%'"
    assert project.scalar(receipts) == total


def test_dj7_a_mismatch_is_quarantined_and_dead_lettered(project: Project) -> None:
    project.publish([("mis-1", "acct", 1)])
    wait_until(lambda: _payments(project, "mis-")[0] == 1, 30, "the first payment")
    project.publish([("mis-1", "acct", 999)])
    quarantine = (
        "SELECT count(*) FROM inboxguard_quarantine"
        " WHERE command_id = 'mis-1' AND reason = 'payload_mismatch'"
    )
    wait_until(lambda: project.scalar(quarantine) == 1, 30, "the quarantine record")
    dead = wait_until(project.dead_letters, 30, "the dead-lettered copy")
    assert len(dead) == 1
    assert "999" in str(dead[0])
    assert _payments(project, "mis-") == (1, 1)


def test_dj7_kill9_after_commit_before_ack_is_a_duplicate(project: Project) -> None:
    log = project.tmp / "worker0.log"
    project.publish([("kill-1", "acct", 7)])
    wait_until(lambda: "hang kill-1" in log.read_text(errors="replace"), 30, "the hang")
    assert _payments(project, "kill-") == (1, 1)  # committed, not acked
    project.stop()  # kill -9 of the whole worker
    project.worker("after.log")
    after = project.tmp / "after.log"
    wait_until(lambda: "already processed" in after.read_text(errors="replace"), 60, "redelivery")
    wait_until(lambda: project.queued() == 0, 30, "the queue drained")
    assert _payments(project, "kill-") == (1, 1)
