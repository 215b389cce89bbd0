"""P24: ``inboxguard doctor`` checks, on RabbitMQ, that each queue a guarded
Celery task is routed to dead-letters into a queue that exists (RabbitMQ
drops dead letters otherwise)."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kombu import Connection, Exchange, Queue

from inboxguard.cli import main
from tests.conftest import AMQP_URL, require_service, unique

APP = """
import datetime as dt
from celery import Celery
from kombu import Exchange, Queue
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker
import inboxguard
from inboxguard.adapters.celery import InboxTask

engine = create_engine({url!r})
inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix={prefix!r})
inbox.create_schema()
app = Celery("{name}", broker={amqp!r}, set_as_current=False)
app.conf.task_queues = [
    Queue({queue!r}, Exchange({queue!r}), routing_key={queue!r}, queue_arguments={arguments!r}),
]
app.conf.task_default_queue = {queue!r}
app.conf.task_routes = {{"{name}.*": {{"queue": {queue!r}}}}}

@app.task(base=InboxTask, inbox=inbox, inbox_session_factory=sessionmaker(engine),
          inbox_command_id="ref", inbox_consumer="payments", max_retries=2,
          retry_backoff_max=60, name="{name}.apply")
def apply(ref):
    return ref
"""


@pytest.fixture
def in_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


@pytest.fixture
def broker() -> Iterator[Connection]:
    require_service("rabbitmq")
    with Connection(AMQP_URL) as conn:
        yield conn


def _doctor(
    in_project: Path, capsys: pytest.CaptureFixture[str], **values: Any
) -> list[dict[str, str]]:
    name = unique("proj")
    (in_project / f"{name}.py").write_text(textwrap.dedent(APP.format(name=name, **values)))
    main(["doctor", "--app", f"{name}:app", "--json"])
    report = json.loads(capsys.readouterr().out)
    return [c for c in report["checks"] if c["check"] == "dead-letter"]


def test_p24_doctor_finds_a_missing_dead_letter_queue_and_a_present_one(
    in_project: Path,
    sqlite_url: str,
    prefix: str,
    broker: Connection,
    capsys: pytest.CaptureFixture[str],
) -> None:
    queue = unique("work")
    dead = f"{queue}.dead"
    arguments = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dead}
    values = {"url": sqlite_url, "prefix": prefix, "amqp": AMQP_URL, "queue": queue}
    [missing] = [
        c
        for c in _doctor(in_project, capsys, arguments=arguments, **values)
        if queue in c["detail"]
    ]
    assert missing["status"] == "fail"
    assert f"there is no queue {dead!r}" in missing["detail"]
    dlq = Queue(dead, Exchange(""), routing_key=dead)
    dlq(broker.default_channel).declare()
    try:
        [present] = [
            c
            for c in _doctor(in_project, capsys, arguments=arguments, **values)
            if queue in c["detail"]
        ]
        assert present["status"] == "ok"
        assert f"dead letters go to queue {dead!r}" in present["detail"]
        [bare] = [
            c for c in _doctor(in_project, capsys, arguments=None, **values) if queue in c["detail"]
        ]
        assert bare["status"] == "warn"
        assert "declares no x-dead-letter-exchange" in bare["detail"]
    finally:
        dlq(broker.default_channel).delete()
