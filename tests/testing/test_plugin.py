"""X7: the plugin is opt-in, imports nothing into inboxguard, and gives each
test a database of its own; the documented examples pass with it."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

from sqlalchemy import create_engine, text

from tests.conftest import PG_ADMIN_URL, require_service

ROOT = Path(__file__).resolve().parents[2]

USES_FIXTURE = """
def test_uses_the_kit(inboxguard_database, inboxguard_inbox, inboxguard_clock):
    from pathlib import Path
    Path(__file__).with_name("db.txt").write_text(str(inboxguard_database.url.database))
    assert inboxguard_inbox.engine is inboxguard_database
    assert inboxguard_inbox.clock is inboxguard_clock
"""


def pytest_run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_x7_installing_inboxguard_loads_no_plugin_and_no_pytest() -> None:
    assert not [e for e in entry_points(group="pytest11") if "inboxguard" in e.value]
    probe = (
        "import sys, inboxguard;"
        " print('pytest' in sys.modules, 'inboxguard.testing' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["False", "False"]


def test_x7_without_opting_in_the_fixtures_do_not_exist(tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(USES_FIXTURE)
    without = pytest_run(str(tmp_path), cwd=tmp_path)
    assert without.returncode != 0
    assert "fixture 'inboxguard_database' not found" in without.stdout


def test_x7_with_a_server_each_test_gets_a_database_of_its_own(tmp_path: Path) -> None:
    """A user's test on PostgreSQL through ``--inboxguard-db``: its database
    is created for it, then dropped."""
    require_service("postgresql")
    (tmp_path / "test_user.py").write_text(USES_FIXTURE)
    server = f"--inboxguard-db={PG_ADMIN_URL}/postgres"
    run = pytest_run("-p", "inboxguard.testing", server, str(tmp_path), cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    name = (tmp_path / "db.txt").read_text()
    assert name.startswith("ig_test_")
    admin = create_engine(f"{PG_ADMIN_URL}/postgres")
    with admin.connect() as conn:
        left = conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name})
        assert left.first() is None
    admin.dispose()
