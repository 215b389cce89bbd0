"""The code samples of docs/observability.md and docs/dashboard.md run
standalone and exit 0 on their embedded default (SQLite)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ["observability_sdk.py", "observability_replayed.py", "dashboard_mount.py"]


@pytest.mark.parametrize("name", SAMPLES)
def test_the_sample_runs(name: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "examples" / name)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
