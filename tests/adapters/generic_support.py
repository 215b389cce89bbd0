"""Helpers of the kombu and asyncio end-to-end suites: real worker processes,
polling with deadlines, and reading what the database and the broker hold."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

import inboxguard
from integrations.payments import Config, payments_table
from tests.conftest import unique

ROOT = Path(__file__).resolve().parents[2]


def wait_until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    """Poll ``predicate`` until it is truthy; fail naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


@dataclass
class Worker:
    """A reference consumer running as a real process."""

    module: str
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = field(default=None)

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", self.module],
                cwd=ROOT,
                env={**os.environ, **self.env},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        starts = self.log.read_text().count("ready") + 1
        wait_until(
            lambda: self._alive() and self.log.read_text().count("ready") >= starts,
            30,
            f"{self.module} to be ready (log: {self.log})",
        )

    def _alive(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.module} exited: {self.log.read_text()[-3000:]}")
        return True

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill9()


@contextmanager
def running(module: str, env: dict[str, str], log: Path) -> Iterator[Worker]:
    """Start a worker and always stop it."""
    worker = Worker(module, env, log)
    try:
        worker.start()
        yield worker
    finally:
        worker.stop()


class Deliveries:
    """The delivery log a worker appends one command ID to per delivery."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.touch()

    def all(self) -> list[str]:
        """Command IDs of the deliveries started."""
        return [t for t in self.path.read_text().split() if not t.startswith("+")]

    def forget(self) -> None:
        """Drop the log of a killed worker, whose last deliveries never settle."""
        self.path.write_text("")

    def settled(self) -> bool:
        """Every delivery started so far has been acked or rejected."""
        tokens = self.path.read_text().split()
        return sum(t.startswith("+") for t in tokens) * 2 == len(tokens)

    def of(self, command_id: str) -> int:
        return self.all().count(command_id)


def payments(engine: Engine, prefix: str) -> tuple[int, int]:
    """(rows, distinct command IDs) of the app's payments table."""
    table = payments_table(prefix)
    with engine.connect() as conn:
        row = conn.execute(select(func.count(), func.count(table.c.command_id.distinct()))).one()
    return int(row[0]), int(row[1])


def paid(engine: Engine, prefix: str, command_id: str) -> list[int]:
    """The amounts applied for one command."""
    table = payments_table(prefix)
    with engine.connect() as conn:
        rows = conn.execute(select(table.c.amount).where(table.c.command_id == command_id))
        return [int(r[0]) for r in rows]


def hold_claim_while(
    engine: Engine,
    inbox: inboxguard.Inbox,
    body: dict[str, Any],
    start: Callable[[], object],
    done: Callable[[], object],
) -> None:
    """Play another consumer: claim ``body``'s command in an open transaction,
    call ``start``, wait until ``done``, then roll back."""
    with Session(engine) as session, session.begin():
        with inbox.guard(
            session, consumer="payments", command_id=body["command_id"], payload=body
        ) as entry:
            assert not entry.duplicate
            start()
            wait_until(done, 30, "the held command to be given up")
        session.rollback()


def reference_settings(
    db_url: str, broker_url: str, prefix: str, tmp: Path
) -> tuple[Config, dict[str, str]]:
    """The reference consumers' settings for one test, and the same as environment
    variables: short lock waits, retries and visibility timeout; a delivery log."""
    config = Config(
        db_url=db_url,
        broker_url=broker_url,
        prefix=prefix,
        queue=unique("q"),
        lock_timeout=dt.timedelta(milliseconds=150),
        max_attempts=3,
        retry_delay=dt.timedelta(milliseconds=200),
        visibility_timeout=2,
    )
    env = {
        "INBOXGUARD_DB_URL": config.db_url,
        "INBOXGUARD_BROKER_URL": config.broker_url,
        "INBOXGUARD_TABLE_PREFIX": config.prefix,
        "INBOXGUARD_QUEUE": config.queue,
        "INBOXGUARD_LOCK_TIMEOUT_MS": "150",
        "INBOXGUARD_MAX_ATTEMPTS": "3",
        "INBOXGUARD_RETRY_DELAY_MS": "200",
        "INBOXGUARD_VISIBILITY_TIMEOUT": "2",
        "INBOXGUARD_DELIVERY_LOG": str(tmp / "deliveries.log"),
    }
    return config, env
