"""`make demo` runs the demo module; it must succeed from a clean temp dir."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_demo_applies_every_command_once() -> None:
    """The demo exits 0, applies 1,000 commands and quarantines the mismatches."""
    proc = subprocess.run(
        [sys.executable, "-m", "integrations.demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "applied (committed)      1,000" in proc.stdout
    assert "quarantined (mismatch)       5" in proc.stdout
