"""The Django samples of docs/adapters/django.md run standalone and exit 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["django_guard.py", "django_celery_task.py"])
def test_the_django_examples_run(name: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "examples" / name)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
