"""The Redis samples of docs/redis.md run against the local Redis (in this
process, as ``__main__``, to spare an interpreter start per sample)."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "docs" / "examples").glob("redis_*.py"))


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_redis_sample_runs(
    sample: Path, redis_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each sample completes (its own asserts hold) having used the server."""
    runpy.run_path(str(sample), run_name="__main__")
    assert "no Redis at" not in capsys.readouterr().out
