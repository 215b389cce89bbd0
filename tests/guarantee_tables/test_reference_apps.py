"""V7: the reference apps' tables match the lock files they commit (the
review rule run by ``make test``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: The environment each lock was reviewed with (the apps' documented defaults).
PG = "postgresql+psycopg://postgres@127.0.0.1/app"
APPS = [
    ("integrations.celery.app:app", "celery", {"INBOXGUARD_DB_URL": PG}),
    ("integrations.ledger.celery_app:app", "ledger", {"INBOXGUARD_DB_URL": PG}),
    ("integrations.dramatiq.worker:broker", "dramatiq", {"INBOXGUARD_DRAMATIQ_DB_URL": PG}),
    ("integrations.kombu.worker:build()", "kombu", {}),
]


@pytest.mark.parametrize(("app", "folder", "env"), APPS, ids=[a[1] for a in APPS])
def test_reference_app_matches_its_lock(
    app: str, folder: str, env: dict[str, str], tmp_path: Path
) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("INBOXGUARD_")}
    lock = REPO / "integrations" / folder / "guarantees.lock"
    command = [sys.executable, "-m", "inboxguard", "guarantees", "--app", app]
    result = subprocess.run(
        [*command, "--check", "--lock", str(lock)],
        env={**clean, **env, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,  # the kombu app creates its SQLite file here
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "matches" in result.stdout
