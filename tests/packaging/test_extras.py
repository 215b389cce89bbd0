"""Every documented extra set works on its own in a fresh virtualenv.

The wheel is built once from this checkout; each extra set is installed with
its dependencies (never ``--no-deps``: the dependencies are what is checked)
into a virtualenv of its own under the test's temporary directory, and a
probe run by that virtualenv's interpreter talks to the real service. Pip
reads its usual configuration and cache. The installs are independent, so
they all start when the first test asks for one and run a few at a time;
each test waits for its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import AMQP_URL, MYSQL_ADMIN_URL, PG_ADMIN_URL, REDIS_URL, require_service
from tests.packaging.probes import EXTRA_SETS

pytestmark = pytest.mark.packaging
ROOT = Path(__file__).resolve().parents[2]
#: Installs run at once; pip waits on the network and the disk as much as on a core.
PARALLEL_INSTALLS = 3


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The inboxguard wheel built from this checkout (only the wheel itself)."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(ROOT)],
        check=True,
        timeout=300,
    )
    (built,) = out.glob("inboxguard-*.whl")
    return built


def _install(wheel: Path, extras: str, home: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A fresh virtualenv under ``home`` with ``inboxguard[extras]`` and its dependencies."""
    venv = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]
    # --no-compile: a probe imports a fraction of what is installed, and
    # compiling every module of every dependency up front took a third or more
    # of each install's time.
    install = subprocess.run(
        [*pip, "install", "--quiet", "--no-compile", f"{wheel}[{extras}]"],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return venv, install


@pytest.fixture(scope="module")
def installs(
    wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[tuple[Path, subprocess.CompletedProcess[str]]]]]:
    """Every extra set's install, started together, a few at a time."""
    with ThreadPoolExecutor(PARALLEL_INSTALLS, thread_name_prefix="install") as pool:
        yield {
            extras: pool.submit(_install, wheel, extras, tmp_path_factory.mktemp("extras"))
            for extras in EXTRA_SETS
        }


def _probe_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(PG_URL=PG_ADMIN_URL, MYSQL_URL=MYSQL_ADMIN_URL, REDIS_URL=REDIS_URL)
    env["AMQP_URL"] = AMQP_URL
    return env


@pytest.mark.parametrize("extras", list(EXTRA_SETS))
def test_extra_set_works_alone_in_a_fresh_virtualenv(
    extras: str,
    installs: dict[str, Future[tuple[Path, subprocess.CompletedProcess[str]]]],
    tmp_path: Path,
) -> None:
    """`pip install 'inboxguard[<extras>]'` alone is enough to use what the extra is for."""
    probes, services = EXTRA_SETS[extras]
    for service in services:
        require_service(service)
    venv, install = installs[extras].result(timeout=900)
    assert install.returncode == 0, install.stderr
    python = venv / "bin" / "python"

    def run_probe(number: int, probe: str) -> subprocess.CompletedProcess[str]:
        work = tmp_path / f"probe{number}"
        work.mkdir()
        script = work / "probe.py"
        script.write_text(probe + "\nimport inboxguard\nprint(inboxguard.__file__)\n")
        return subprocess.run(
            [str(python), "-I", str(script)],
            check=False,
            cwd=work,
            env=_probe_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )

    # Two at a time, each in a directory of its own: `all` has a probe per
    # extra, run once the other installs are done and a core would be idle.
    with ThreadPoolExecutor(2, thread_name_prefix="probe") as pool:
        runs = list(pool.map(run_probe, range(len(probes)), probes))
    for number, run in enumerate(runs):
        assert run.returncode == 0, f"[{extras}] probe {number} failed:\n{run.stderr}"
        imported_from = run.stdout.strip().splitlines()[-1]
        assert imported_from.startswith(str(venv)), f"inboxguard came from {imported_from}"
