"""V5-V6: ``inboxguard guarantees`` renders, checks and locks the tables of
an app resolved from the current directory, with exit codes scripts can use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from inboxguard.cli import main
from tests.conftest import unique

REPO = Path(__file__).resolve().parents[2]
KEYS = [
    "handler",
    "consumer",
    "transaction_boundary",
    "delivery_mode",
    "identity",
    "provider_behaviour",
    "dedup_window",
    "reconciliation",
    "terminal_states",
    "layer",
]
APP = """
import datetime as dt
import os
from sqlalchemy import create_engine
import inboxguard

engine = create_engine("sqlite:///" + os.path.join(os.path.dirname(__file__), "app.db"))
DAYS = int(os.environ.get("TABLES_DAYS", "7"))
inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=DAYS))
stripe = inboxguard.known_contract("stripe")
ledger = inboxguard.EffectLedger(engine, table_prefix="fx_")

@inbox.handler(
    consumer="billing.charge",
    command_id="invoice_id",
    guarantee=inboxguard.Guarantee(provider=stripe, ledger=ledger, terminal_states=["charged"]),
)
def charge(session, invoice_id):
    return None
"""


@pytest.fixture
def app_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = unique("tables_app_")
    (tmp_path / f"{name}.py").write_text(APP)
    monkeypatch.chdir(tmp_path)  # resolved from the current directory, no PYTHONPATH
    return name


def test_markdown_json_and_exit_codes(app_module: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["guarantees", "--app", f"{app_module}:inbox"]) == 0
    out = capsys.readouterr().out
    assert "## `billing.charge`" in out
    assert "| after a lost ack |" in out
    assert "| remains unknown |" in out
    assert main(["guarantees", "--app", f"{app_module}:inbox", "--json"]) == 0
    (table,) = json.loads(capsys.readouterr().out)
    assert sorted(table) == sorted(KEYS)
    assert table["delivery_mode"]["value"] is None  # Inbox.handler cannot see the acks
    assert main(["guarantees", "--app", f"{app_module}:missing"]) == 2
    assert "could not be loaded" in capsys.readouterr().err


def test_check_and_lock(
    app_module: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = tmp_path / "guarantees.lock"
    args = ["guarantees", "--app", f"{app_module}:inbox"]
    assert main([*args, "--check", "--lock", str(lock)]) == 1
    assert "does not exist" in capsys.readouterr().out
    assert main([*args, "--lock", str(lock)]) == 0
    assert main([*args, "--check", "--lock", str(lock)]) == 0
    assert "matches" in capsys.readouterr().out


def test_a_changed_retention_fails_the_locked_check(app_module: str, tmp_path: Path) -> None:
    """The review rule end to end, in a fresh process as CI runs it."""
    lock = tmp_path / "guarantees.lock"
    cli = [sys.executable, "-m", "inboxguard", "guarantees", "--app", f"{app_module}:inbox"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    written = subprocess.run([*cli, "--lock", str(lock)], env=env, cwd=tmp_path, check=False)
    assert written.returncode == 0
    env["TABLES_DAYS"] = "3"
    checked = subprocess.run(
        [*cli, "--check", "--lock", str(lock)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 1
    assert 'horizon changed since the review: "7d" (lock) -> "3d" (now)' in checked.stdout
    # stripe forgets keys after 24h; a 3-day evidence window is not the issue here
    assert "idempotency_window" not in checked.stdout
