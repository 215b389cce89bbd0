"""The guarantee-tables page's samples run standalone and exit 0."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "docs" / "examples").glob("guarantee_tables_*.py"))


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.name for s in SAMPLES])
def test_sample_runs(sample: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(sample)], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "changed since the review" in result.stdout


def test_there_is_a_sample() -> None:
    assert SAMPLES
