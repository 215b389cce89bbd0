"""V7: the reference apps' tables match the lock files they commit (the
review rule, run by ``make test``). One fresh process runs
``inboxguard guarantees --check --lock`` on each app in turn, with the
environment that app's lock was reviewed with."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import require_service

REPO = Path(__file__).resolve().parents[2]
#: The environment each lock was reviewed with (the apps' documented defaults).
PG = "postgresql+psycopg://postgres@127.0.0.1/app"
APPS = [
    ("integrations.celery.app:app", "celery", {"INBOXGUARD_DB_URL": PG}),
    ("integrations.ledger.celery_app:app", "ledger", {"INBOXGUARD_DB_URL": PG}),
    ("integrations.dramatiq.worker:broker", "dramatiq", {"INBOXGUARD_DRAMATIQ_DB_URL": PG}),
    (
        "integrations.ledger.dramatiq_charges:reference.broker",
        "ledger/guarantees-dramatiq.lock",
        {"INBOXGUARD_DRAMATIQ_DB_URL": PG},
    ),
    ("integrations.kombu.worker:build()", "kombu", {}),
    ("integrations.outbox.consumer:build()", "outbox", {"OUTBOX_DATABASE_URL": PG}),
]
#: Runs the command once per app, in one interpreter; each app reads its
#: environment when it is imported or built, so the environment is set first.
DRIVER = """
import json, os, sys
from inboxguard.cli import main

status = 0
for app, lock, env in json.loads(sys.argv[1]):
    for name in [n for n in os.environ if n.startswith(("INBOXGUARD_", "OUTBOX_"))]:
        del os.environ[name]
    os.environ.update(env)
    print("==", app, flush=True)
    status |= main(["guarantees", "--app", app, "--check", "--lock", lock])
sys.exit(status)
"""


def test_reference_apps_match_their_locks(tmp_path: Path) -> None:
    check_locks(APPS, tmp_path)


def test_asyncio_reference_app_matches_its_lock(tmp_path: Path) -> None:
    """The aio-pika consumer declares its callback on a real channel's exchange."""
    require_service("rabbitmq")
    check_locks([("integrations.asyncio.consumer:build()", "asyncio", {})], tmp_path)


def check_locks(apps: list[tuple[str, str, dict[str, str]]], tmp_path: Path) -> None:
    """Each app must match its lock (a missing lock fails too)."""
    runs = []
    for app, where, env in apps:
        lock = REPO / "integrations" / where
        runs.append((app, str(lock if lock.suffix == ".lock" else lock / "guarantees.lock"), env))
    result = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(runs)],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
        cwd=tmp_path,  # the kombu app creates its SQLite file here
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("matches") == len(apps), result.stdout
