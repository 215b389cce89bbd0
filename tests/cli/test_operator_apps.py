"""``--app module:attr`` from the current directory, ``retention explain --app``
with the windows the Celery and Dramatiq workers discover, ``doctor --app``,
and the INFO line a worker logs when its start-up checks pass (P7-P9)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

import inboxguard
from inboxguard.cli import main
from tests.conftest import unique

CELERY_APP = """
import datetime as dt
from celery import Celery
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker
import inboxguard
from inboxguard.adapters.celery import InboxTask

engine = create_engine({url!r})
inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix={prefix!r})
app = Celery("{name}", broker="redis://127.0.0.1:6379/0", set_as_current=False)
app.conf.broker_transport_options = {{"visibility_timeout": {visibility}}}

@app.task(base=InboxTask, inbox=inbox, inbox_session_factory=sessionmaker(engine),
          inbox_command_id="ref", inbox_consumer="payments", max_retries=5,
          retry_backoff_max=60, default_retry_delay=10, name="{name}.apply")
def apply(ref):
    return ref
"""

DRAMATIQ_APP = """
import datetime as dt
import dramatiq
from dramatiq.brokers.stub import StubBroker
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker
import inboxguard
from inboxguard.adapters.dramatiq import InboxMiddleware

engine = create_engine({url!r})
inbox = inboxguard.Inbox(engine, retention=dt.timedelta(hours=1), table_prefix={prefix!r})
broker = StubBroker()
broker.add_middleware(InboxMiddleware(inbox, session_factory=sessionmaker(engine)))

@dramatiq.actor(broker=broker, inbox_command_id="ref", inbox_consumer="payments",
                max_retries={retries}, min_backoff=60000, max_backoff=600000)
def apply(ref):
    return ref
"""


def _project(tmp_path: Path, template: str, **values: Any) -> str:
    """Write an application module in ``tmp_path``; return its name."""
    name = unique("proj")
    source = template.format(name=name, **values)
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    return name


@pytest.fixture
def in_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in ``tmp_path`` as the project's root; sys.path is restored after."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


def test_p7_module_attr_resolves_from_the_current_directory_like_celery_a(
    tmp_path: Path, sqlite_url: str, prefix: str
) -> None:
    """The console script, run from the project's root without PYTHONPATH."""
    name = _project(tmp_path, CELERY_APP, url=sqlite_url, prefix=prefix, visibility=7200)
    script = str(Path(sys.executable).with_name("inboxguard"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [script, "retention", "explain", "--app", f"{name}:app", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    [group] = json.loads(done.stdout)
    assert group["handler"] == f"{name}.apply"
    discovered = {w["window"]: (w["length"], w["fits"]) for w in group["discovered"]}
    # Discovered from the broker and the task, not declared on the policy.
    assert discovered == {"visibility_timeout": (7200.0, True), "retry_schedule": (300.0, True)}
    assert [r["window"] for r in group["declared"]] == ["retention", "margin", "horizon"]


def test_p7_retention_explain_shows_dramatiq_windows_and_fails_when_one_is_too_long(
    in_project: Path, sqlite_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = _project(in_project, DRAMATIQ_APP, url=sqlite_url, prefix=prefix, retries=20)
    assert main(["retention", "explain", "--app", f"{name}:broker"]) == 1
    out = capsys.readouterr().out
    assert "retry_schedule" in out
    assert "Retries schedule of actor 'apply'" in out
    assert "TOO LONG" in out  # 20 retries of up to 10 min outlive a 1h horizon
    assert main(["retention", "check", "--app", f"{name}:broker", "--json"]) == 1
    [group] = json.loads(capsys.readouterr().out)
    assert [w["window"] for w in group["discovered"] if not w["fits"]] == ["retry_schedule"]


def test_p8_doctor_passes_a_sound_app_and_names_each_failure(
    in_project: Path, sqlite_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _project(in_project, DRAMATIQ_APP, url=sqlite_url, prefix=prefix, retries=1)
    # No database file yet: doctor says so, and does not create one by connecting.
    assert main(["doctor", "--app", f"{good}:broker", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    failed = {c["check"] for c in report["checks"] if c["status"] == "fail"}
    assert failed == {"connection", "startup"}
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()

    assert main(["db", "upgrade", "--db", sqlite_url, "--prefix", prefix, "--part", "inbox"]) == 0
    engine = create_engine(sqlite_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE {prefix}quarantine_actions")
    capsys.readouterr()
    assert main(["doctor", "--app", f"{good}:broker", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    [failure] = [c for c in report["checks"] if c["status"] == "fail"]
    assert failure["check"] == "tables"
    assert f"{prefix}quarantine_actions" in failure["detail"]

    inboxguard.Inbox(engine, retention=dt.timedelta(hours=1), table_prefix=prefix).create_schema()
    engine.dispose()
    assert main(["doctor", "--app", f"{good}:broker"]) == 0
    out = capsys.readouterr().out
    assert "revisions" in out
    assert "ig0004" in out
    assert "retry_schedule" in out

    bad = _project(in_project, DRAMATIQ_APP, url=sqlite_url, prefix=prefix, retries=20)
    assert main(["doctor", "--app", f"{bad}:broker", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    [misfit] = [c for c in report["checks"] if c["check"] == "retention" and c["status"] == "fail"]
    assert "retry_schedule" in misfit["detail"]
    assert "outlives the evidence horizon 1h" in misfit["detail"]

    assert main(["doctor", "--app", f"{good}:nothing"]) == 2
    assert "has no attribute 'nothing'" in capsys.readouterr().err
    assert main(["doctor", "--app", "no_such_module_here:app"]) == 2
    assert "no module named 'no_such_module_here'" in capsys.readouterr().err


CELERY_WORKER_START = """
import logging, sys
from types import SimpleNamespace
from inboxguard.adapters.celery._startup import _refuse_misaligned_worker
import {name} as project
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(levelname)s %(message)s")
project.inbox.create_schema()
_refuse_misaligned_worker(instance=SimpleNamespace(app=project.app))
"""


def test_p9_workers_log_one_info_line_when_their_checks_pass(
    in_project: Path, sqlite_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Celery's worker hook runs in a process of its own: in this one, the
    shared tasks other tests declared would join every app."""
    from inboxguard.cli._app import resolve_object

    celery = _project(in_project, CELERY_APP, url=sqlite_url, prefix=prefix, visibility=7200)
    started = subprocess.run(
        [sys.executable, "-c", CELERY_WORKER_START.format(name=celery)],
        cwd=in_project,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert started.returncode == 0, started.stderr
    [celery_line] = [
        line for line in started.stdout.splitlines() if "Celery start-up checks passed" in line
    ]
    assert celery_line.startswith("INFO ")
    assert "visibility_timeout=2h" in celery_line
    assert "fits inside 1d" in celery_line

    dramatiq = _project(in_project, DRAMATIQ_APP, url=sqlite_url, prefix=prefix, retries=1)
    broker = resolve_object(f"{dramatiq}:broker")
    [middleware] = [m for m in broker.middleware if type(m).__name__ == "InboxMiddleware"]
    middleware.inbox.create_schema()
    with caplog.at_level(logging.INFO, logger="inboxguard"):
        middleware.before_worker_boot(broker, None)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    [dramatiq_line] = [line for line in lines if "Dramatiq start-up checks passed" in line]
    assert "retry_schedule" in dramatiq_line


INBOX_APP = """
import datetime as dt
from sqlalchemy import create_engine
import inboxguard

engine = create_engine({url!r})
inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix={prefix!r})
"""


def test_p8_doctor_checks_the_connection_of_each_database(
    in_project: Path, db_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bare module name finds its ``inbox``; the connection check reports the
    isolation level and, on MariaDB, passes the utf8mb4 check."""
    name = _project(in_project, INBOX_APP, url=db_url, prefix=prefix)
    engine = create_engine(db_url)
    box = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    box.create_schema()
    try:
        assert main(["doctor", "--app", name, "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["framework"] == "inbox"
        [connection] = [c for c in report["checks"] if c["check"] == "connection"]
        assert connection["status"] == "ok"
        assert "isolation" in connection["detail"]
    finally:
        box.drop_schema()
        engine.dispose()
