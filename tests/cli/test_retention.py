"""The ``inboxguard`` command: retention explain/check and purge, run as real processes."""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
from pathlib import Path

import pytest

import inboxguard
from inboxguard.cli._duration import parse_duration
from tests.inbox.retention.helpers import DAY, count_rows, seed

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inboxguard", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30d", dt.timedelta(days=30)),
        ("12h", dt.timedelta(hours=12)),
        ("90m", dt.timedelta(minutes=90)),
        ("1d12h", dt.timedelta(days=1, hours=12)),
        ("P30D", dt.timedelta(days=30)),
        ("PT12H", dt.timedelta(hours=12)),
        ("P1DT6H30M", dt.timedelta(days=1, hours=6, minutes=30)),
        ("P2W", dt.timedelta(weeks=2)),
    ],
)
def test_durations_parse(text: str, expected: dt.timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "30", "3q", "P", "PT", "-1d", "P1DT"])
def test_bad_durations_name_the_accepted_forms(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="30d, 12h, 90m"):
        parse_duration(text)


def test_retention_explain_prints_windows_sources_and_horizon() -> None:
    done = run(
        "retention",
        "explain",
        "--policy",
        "tests.inbox.retention.helpers:WORKED_EXAMPLE",
        "--window",
        "visibility_timeout=1h",
    )
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    assert lines[0] == ["WINDOW", "LENGTH", "SOURCE"]
    assert ["dispute", "60d", "declared"] in lines
    assert ["visibility_timeout", "1h", "command", "line"] in lines
    assert ["horizon", "62d", "longest", "declared", "window", "+", "margin"] in lines


def test_retention_check_exits_1_on_misalignment() -> None:
    done = run("retention", "check", "--declare", "dlq=P30D", "--window", "dispute=60d")
    assert done.returncode == 1
    assert "'dispute'" in done.stderr
    assert "60d" in done.stderr
    assert "31d" in done.stderr  # 30 days + the default 1-day margin


def test_retention_check_exits_0_when_aligned() -> None:
    done = run("retention", "check", "--declare", "dlq=30d", "--window", "visibility_timeout=1h")
    assert done.returncode == 0, done.stderr
    assert "aligned" in done.stdout


def test_retention_check_without_a_policy_says_how_to_give_one() -> None:
    done = run("retention", "check", "--window", "dlq=30d")
    assert done.returncode == 2
    assert "--policy MODULE:ATTR" in done.stderr


def test_purge_dry_run_then_purge(engine, prefix: str, db_url: str) -> None:
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=10), table_prefix=prefix)
    inbox.create_schema()
    try:
        now = dt.datetime.now(dt.UTC)
        seed(inbox, [f"old-{i}" for i in range(25)], processed_at=now - 20 * DAY)
        seed(inbox, ["young"], processed_at=now - DAY)
        dry = run("purge", "--url", db_url, "--prefix", prefix, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert "25 expired rows" in dry.stdout
        assert "--url is deprecated; use --db" in dry.stderr  # the old spelling still works
        assert count_rows(inbox) == 26
        done = run("purge", "--db", db_url, "--prefix", prefix, "--batch-size", "7")
        assert done.returncode == 0, done.stderr
        assert "deleted 25 expired rows" in done.stdout
        assert done.stderr == ""  # no progress bar when stderr is not a terminal
        assert count_rows(inbox) == 1
    finally:
        inbox.drop_schema()


def test_purge_of_a_missing_table_names_the_prefix(sqlite_url: str) -> None:
    done = run("purge", "--url", sqlite_url, "--prefix", "nosuch_")
    assert done.returncode == 2
    assert "nosuch_inbox" in done.stderr
    assert "--prefix" in done.stderr


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).with_name("inboxguard")
    done = subprocess.run(
        [str(script), "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0
    assert "retention" in done.stdout
    assert "purge" in done.stdout
