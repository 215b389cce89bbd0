"""One environment variable for the database, and ``serve-metrics --app``."""

from __future__ import annotations

import datetime as dt
import sys
import textwrap
from pathlib import Path

import pytest

from inboxguard.cli import build_parser, main
from inboxguard.cli.serve_metrics import _target
from tests.conftest import unique

INBOX_APP = """
import datetime as dt
from sqlalchemy import create_engine
import inboxguard

inbox = inboxguard.Inbox(
    create_engine({url!r}), retention=dt.timedelta(days=9), table_prefix={prefix!r}
)
"""


@pytest.fixture
def in_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


def test_the_old_variable_still_works_with_a_deprecation_note(
    inbox: object,
    db_url: str,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("INBOXGUARD_DB_URL", raising=False)
    monkeypatch.setenv("INBOXGUARD_DATABASE_URL", db_url)
    with pytest.warns(DeprecationWarning, match="INBOXGUARD_DB_URL"):
        assert main(["quarantine", "list", "--prefix", prefix]) == 0
    assert (
        "$INBOXGUARD_DATABASE_URL is deprecated; set $INBOXGUARD_DB_URL" in capsys.readouterr().err
    )


def test_serve_metrics_takes_the_horizon_database_and_prefix_from_app(
    in_project: Path, sqlite_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INBOXGUARD_DB_URL", raising=False)
    monkeypatch.delenv("INBOXGUARD_DATABASE_URL", raising=False)
    name = unique("proj")
    (in_project / f"{name}.py").write_text(
        textwrap.dedent(INBOX_APP.format(url=sqlite_url, prefix=prefix))
    )
    args = build_parser().parse_args(["serve-metrics", "--port", "0", "--app", f"{name}:inbox"])
    engine, table_prefix, horizon = _target(args)
    assert (str(engine.url), table_prefix) == (sqlite_url, prefix)
    assert horizon is not None
    assert horizon >= dt.timedelta(days=9)
    given = build_parser().parse_args(
        ["serve-metrics", "--port", "0", "--app", f"{name}:inbox", "--horizon", "2d"]
    )
    assert _target(given)[2] == dt.timedelta(days=2)
