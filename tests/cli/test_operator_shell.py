"""What every subcommand shares: ``--db``, ``--version``, exit codes, no SQLite
file created by a read, driver hints, secrets never printed; and ``db
upgrade|current`` on each supported database (P4-P6)."""

from __future__ import annotations

import datetime as dt
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import inspect
from sqlalchemy.engine import Engine

import inboxguard
from inboxguard.cli import main
from inboxguard.cli.purge import ProgressBar
from tests.conftest import unique
from tests.sql.migrations.test_alembic import alembic_config


def test_p4_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"inboxguard {inboxguard.__version__}"
    with pytest.raises(SystemExit):
        main(["--help"])
    shown = capsys.readouterr().out
    for name in ("stats", "explain", "quarantine", "doctor", "db", "purge", "Exit status"):
        assert name in shown


READS = [
    ["stats"],
    ["explain", "c", "x"],
    ["quarantine", "list"],
    ["quarantine", "show", "1"],
    ["db", "current"],
    ["purge", "--dry-run"],
    ["effects", "list"],
    ["outbox", "status"],
]


@pytest.mark.parametrize("argv", READS, ids=lambda a: "-".join(a[:2]))
def test_p4_a_read_never_creates_a_sqlite_file(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "typo.db"
    assert main([*argv, "--db", f"sqlite:///{path}"]) == 2
    err = capsys.readouterr().err
    assert "no SQLite database at" in err
    assert str(path) in err
    assert not path.exists()


def test_p4_db_comes_from_the_environment_for_every_subcommand(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "env.db"
    monkeypatch.setenv("INBOXGUARD_DB_URL", f"sqlite:///{path}")
    for argv in READS:
        assert main(argv) == 2, argv  # built after the variable is set: it is read
        assert str(path) in capsys.readouterr().err
    monkeypatch.delenv("INBOXGUARD_DB_URL")
    monkeypatch.delenv("INBOXGUARD_DATABASE_URL", raising=False)
    for argv in READS:
        assert main(argv) == 2
        assert "--db is required (or set INBOXGUARD_DB_URL)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("url", "hint"),
    [
        ("postgresql://ops:s3cret@127.0.0.1/app", "postgresql+psycopg://ops:***@127.0.0.1/app"),
        ("mysql://ops:s3cret@127.0.0.1/app", "mysql+pymysql://ops:***@127.0.0.1/app"),
    ],
)
def test_p5_a_missing_driver_names_the_one_the_extras_install(
    url: str, hint: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The default drivers are not installed; tests elsewhere may stand PyMySQL in for MySQLdb.
    for module in ("MySQLdb", "psycopg2"):
        monkeypatch.setitem(sys.modules, module, None)
    assert main(["stats", "--db", url]) == 2
    err = capsys.readouterr().err
    assert hint in err
    assert "s3cret" not in err


def test_p5_an_unreachable_database_exits_3_without_its_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "postgresql+psycopg://ops:s3cret@127.0.0.1:1/app?connect_timeout=2"
    for argv in (["stats"], ["quarantine", "list"], ["db", "current"], ["outbox", "status"]):
        assert main([*argv, "--db", url]) == 3, argv
        err = capsys.readouterr().err
        assert "cannot use the database postgresql+psycopg://ops:***@127.0.0.1:1/app" in err
        assert "s3cret" not in err


def test_p5_progress_bar_only_on_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    report = inboxguard.PurgeReport(deleted=5, batches=1)
    for out, drawn in ((Terminal(), True), (io.StringIO(), False)):
        bar = ProgressBar(10, out)
        bar.update(report)
        bar.finish()
        assert ("[###############---------------]  50% 5/10 rows" in out.getvalue()) is drawn
        assert bool(out.getvalue()) is drawn


def _shape(engine: Engine, prefix: str) -> set[str]:
    return {
        t.removeprefix(prefix) for t in inspect(engine).get_table_names() if t.startswith(prefix)
    }


def test_p6_db_upgrade_from_an_older_revision_and_current(
    engine: Engine, db_url: str, prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A database an earlier release migrated with the project's own Alembic env.
    cfg = alembic_config(tmp_path, db_url, prefix)
    command.upgrade(cfg, "ig0003")
    capsys.readouterr()  # what `alembic init` printed
    own = ["--db", db_url, "--prefix", prefix, "--version-table", "alembic_version"]
    own += ["--part", "inbox"]
    status = main(["db", "current", *own, "--json"])
    [state] = json.loads(capsys.readouterr().out)
    assert (status, state["current"], state["head"]) == (1, "ig0003", "ig0004")
    assert "quarantine_actions" not in _shape(engine, prefix)

    assert main(["db", "upgrade", *own]) == 0
    assert "ig0004" in capsys.readouterr().out
    assert "quarantine_actions" in _shape(engine, prefix)
    assert main(["db", "current", *own]) == 0
    capsys.readouterr()
    # The upgraded tables work: a release is recorded in the new table.
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.quarantine_delivery(
        consumer="c",
        command_id="x",
        payload={},
        reason=inboxguard.QuarantineReason.RETRIES_EXHAUSTED,
    )
    [record] = inbox.quarantined()
    assert inbox.release_quarantine(record.id, actor="ops", reason="r") is not None
    command.downgrade(cfg, "inboxguard@base")
    assert _shape(engine, prefix) == set()

    # A fresh database: every part, in a version table of inboxguard's own.
    fresh = unique("f") + "_"
    try:
        assert main(["db", "upgrade", "--db", db_url, "--prefix", fresh]) == 0
        assert _shape(engine, fresh) == {
            "alembic_version",
            "inbox",
            "quarantine",
            "quarantine_actions",
            "quarantine_replays",
            "watermark",
            "outbox",
            "effects",
            "effect_history",
        }
        assert main(["db", "upgrade", "--db", db_url, "--prefix", fresh]) == 0  # a no-op
        capsys.readouterr()
        assert main(["db", "current", "--db", db_url, "--prefix", fresh, "--json"]) == 0
        states = json.loads(capsys.readouterr().out)
        assert [(s["part"], s["up_to_date"]) for s in states] == [
            ("inbox", True),
            ("outbox", True),
            ("effects", True),
        ]
    finally:
        inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=fresh).drop_schema()
        inboxguard.Outbox(engine, table_prefix=fresh).drop_schema()
        inboxguard.EffectLedger(engine, table_prefix=fresh).drop_schema()
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE {fresh}alembic_version")


def test_p6_create_schema_tables_are_adopted_with_stamp_not_broken_by_upgrade(
    sqlite_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from sqlalchemy import create_engine

    engine = create_engine(sqlite_url)
    inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix).create_schema()
    db = ["--db", sqlite_url, "--prefix", prefix, "--part", "inbox"]
    assert main(["db", "upgrade", *db]) == 2
    assert "inboxguard db stamp ig0004" in capsys.readouterr().err
    assert main(["db", "stamp", "ig0004", "--db", sqlite_url, "--prefix", prefix]) == 0
    assert main(["db", "upgrade", *db]) == 0
    assert main(["db", "current", *db]) == 0
    assert main(["db", "stamp", "ig9999", "--db", sqlite_url, "--prefix", prefix]) == 2
    assert "ig9999" in capsys.readouterr().err
    engine.dispose()


def test_the_operations_sample_runs() -> None:
    sample = Path(__file__).resolve().parents[2] / "docs/examples/operations_read_model.py"
    done = subprocess.run(
        [sys.executable, str(sample)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "released by ann" in done.stdout


def test_p5_secret_query_parameters_are_masked_too(capsys: pytest.CaptureFixture[str]) -> None:
    url = "postgresql+psycopg://ops@127.0.0.1:1/app?sslpassword=hunter2&connect_timeout=2"
    assert main(["stats", "--db", url]) == 3
    err = capsys.readouterr().err
    assert "sslpassword=REDACTED" in err
    assert "hunter2" not in err
