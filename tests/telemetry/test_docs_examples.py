"""The code samples of docs/observability.md and docs/dashboard.md run
standalone and exit 0 on their embedded default (SQLite).

All three run in one fresh interpreter (``runpy``, as ``python FILE`` would),
to pay for one start-up instead of three."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ["observability_sdk.py", "observability_replayed.py", "dashboard_mount.py"]


def test_the_samples_run() -> None:
    paths = [str(ROOT / "docs" / "examples" / name) for name in SAMPLES]
    code = (
        "import runpy, sys\n"
        f"for path in {paths!r}:\n"
        "    sys.argv = [path]\n"
        "    runpy.run_path(path, run_name='__main__')\n"
        "    print('ran', path)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("ran ") == len(SAMPLES)
