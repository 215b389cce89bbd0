"""Every sample the docs show runs, as a user would run it.

- ``docs/examples/<topic>_<what>.py`` is a script: it runs standalone with
  ``python docs/examples/<file>`` in an empty working directory, on SQLite, and
  must exit 0 (each asserts the outcome it describes, so a sample that stops
  doing what its page says fails here).
- ``docs/examples/test_<topic>_<what>.py`` is a pytest file, run with pytest.

A script that needs a broker says so on a line ``# needs: rabbitmq`` (or
``redis``), and its test skips (in CI, fails) when that service is down. The
scripts run concurrently, so the whole check costs about as much as the
slowest few of them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import AMQP_URL, REDIS_URL, require_service, service_up
from tests.docs.pages import EXAMPLES

RUNNER = Path(__file__).with_name("fork_runner.py")

SCRIPTS = sorted(p for p in EXAMPLES.glob("*.py") if not p.name.startswith("test_"))
PYTEST_SAMPLES = sorted(EXAMPLES.glob("test_*.py"))
_NEEDS = re.compile(r"^# needs: (?P<services>[\w, ]+)$", re.MULTILINE)
_TIMEOUT = 90


def _needs(script: Path) -> list[str]:
    match = _NEEDS.search(script.read_text(encoding="utf-8"))
    return [s.strip() for s in match["services"].split(",")] if match else []


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.setdefault("INBOXGUARD_AMQP_URL", AMQP_URL)
    env.setdefault("INBOXGUARD_REDIS_URL", REDIS_URL)
    return env


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str, str]]:
    """Run every script whose services are up, each in an empty directory of its own.

    The scripts run as forked children of one interpreter that imported the
    heavy libraries once (tests/docs/fork_runner.py), three at a time: several
    spend most of their run waiting on a worker or a broker, so a third keeps
    both cores busy.
    """
    base = tmp_path_factory.mktemp("examples")
    runnable = [str(s) for s in SCRIPTS if all(service_up(n) for n in _needs(s))]
    runnable += [str(s) for s in PYTEST_SAMPLES]
    proc = subprocess.run(
        [sys.executable, str(RUNNER), str(base), "3", *runnable],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=_TIMEOUT * 3,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return {
        name: tuple(result) for name, result in json.loads(proc.stdout.splitlines()[-1]).items()
    }


def test_there_are_samples() -> None:
    """The glob finds the samples (a moved folder would otherwise pass silently)."""
    assert len(SCRIPTS) >= 10
    assert PYTEST_SAMPLES


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_runs(script: Path, results: dict[str, tuple[int, str, str]]) -> None:
    """The sample exits 0 from an empty directory."""
    for service in _needs(script):
        require_service(service)
    status, stdout, stderr = results[script.name]
    assert status == 0, (
        f"python docs/examples/{script.name} exited {status}\n"
        f"--- stdout\n{stdout}\n--- stderr\n{stderr}"
    )


def test_a_sample_runs_in_a_fresh_interpreter(tmp_path: Path) -> None:
    """The quick start as a user runs it, ``python quickstart_guard.py`` in an
    empty directory, in an interpreter of its own."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "quickstart_guard.py")],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=_TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "billing.db").is_file()


@pytest.mark.parametrize("sample", PYTEST_SAMPLES, ids=lambda p: p.name)
def test_pytest_sample_passes(sample: Path, results: dict[str, tuple[int, str, str]]) -> None:
    """The pytest sample passes when pytest runs it, as a user's suite would."""
    status, stdout, stderr = results[sample.name]
    assert status == 0, stdout + stderr
    assert " passed" in stdout
    assert "failed" not in stdout
