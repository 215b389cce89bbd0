"""C28: the Celery worker's start-up line names the task of its closest window once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cli.test_operator_apps import CELERY_APP, CELERY_WORKER_START, _project, in_project

__all__ = ["in_project"]


def test_c28_the_start_up_line_names_each_task_once(
    in_project: Path, sqlite_url: str, prefix: str
) -> None:
    """The retry schedule (5 x 60 s) is the closest window: its source already
    names the task, and the line does not name it a second time."""
    name = _project(in_project, CELERY_APP, url=sqlite_url, prefix=prefix, visibility=60)
    started = subprocess.run(
        [sys.executable, "-c", CELERY_WORKER_START.format(name=name)],
        cwd=in_project,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert started.returncode == 0, started.stderr
    [line] = [s for s in started.stdout.splitlines() if "Celery start-up checks passed" in s]
    assert "retry_schedule=5m" in line
    assert line.count(f"{name}.apply") == 1, line
