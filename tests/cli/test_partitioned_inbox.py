"""The operator commands on a partitioned PostgreSQL inbox
(``Inbox(..., partitioning="daily")``): ``stats``, ``explain``, ``quarantine
list|show|release``, ``purge --dry-run`` and ``doctor`` read it as they read a
plain one, and say so when a flag or a setting is missing (P11)."""

from __future__ import annotations

import datetime as dt
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

import inboxguard
from inboxguard.cli import main
from tests.conftest import FakeClock, unique
from tests.inbox.partitioning.conftest import fill_for_operators, partitions, where_rows

HORIZON = dt.timedelta(days=2)


@pytest.fixture
def pg_engine(pg_url: str) -> Iterator[Engine]:
    engine = create_engine(pg_url)
    yield engine
    engine.dispose()


@pytest.fixture
def pbox(pg_engine: Engine, prefix: str) -> Iterator[inboxguard.Inbox]:
    """A daily-partitioned inbox on the real clock (the commands read at now)."""
    box = inboxguard.Inbox(pg_engine, retention=HORIZON, table_prefix=prefix, partitioning="daily")
    box.create_schema()
    yield box
    box.drop_schema()


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    try:
        out = json.loads(captured.out)
    except ValueError:
        out = captured.out
    return status, out, captured.err


def test_p11_stats_explain_and_quarantine_read_a_partitioned_inbox(
    pbox: inboxguard.Inbox, pg_engine: Engine, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    record_id = fill_for_operators(pbox)
    ahead = pbox.create_partitions(ahead=5)
    assert len(ahead) == 2  # two periods more than create_schema()'s three
    landed = set(where_rows(pg_engine, pbox).values())
    [partition] = landed  # the three claims expire on the same day
    assert partition in partitions(pg_engine, pbox)
    assert not partition.endswith("_default")
    db = ["--db", pg_url, "--prefix", pbox.table_prefix, "--json"]

    status, found, _ = _cli(capsys, "stats", *db)
    assert status == 0
    [billing] = found["consumers"]
    assert (billing["consumer"], billing["processed"], billing["quarantined"]) == ("billing", 3, 1)

    status, told, _ = _cli(capsys, "explain", *db, "billing", "c-2")
    assert status == 0
    assert told["verdict"] == "duplicate"
    assert told["evidence"]["result"] == {"applied": 2}
    [detail] = told["quarantine"]
    assert (detail["record"]["id"], detail["record"]["status"]) == (record_id, "open")
    status, told, _ = _cli(capsys, "explain", *db, "billing", "c-9")
    assert (status, told["verdict"], told["evidence"]) == (0, "fresh", None)

    status, listed, _ = _cli(capsys, "quarantine", "list", *db)
    assert status == 0
    assert [(r["id"], r["command_id"], r["reason"]) for r in listed] == [
        (record_id, "c-2", "payload_mismatch")
    ]
    status, shown, _ = _cli(capsys, "quarantine", "show", *db, str(record_id))
    assert (status, shown["command_id"], shown["occurrences"]) == (0, "c-2", 1)

    # Release removes the evidence from its partition: the refused payload runs next time.
    args = (
        "quarantine",
        "release",
        *db,
        str(record_id),
        "--reason",
        "upstream fixed",
        "--by",
        "ana",
    )
    status, released, _ = _cli(capsys, *args)
    assert (status, released["action"], released["actor"]) == (0, "release", "ana")
    assert sorted(where_rows(pg_engine, pbox)) == ["c-1", "c-3"]
    status, found, _ = _cli(capsys, "stats", *db)
    [billing] = found["consumers"]
    assert (billing["processed"], billing["quarantined"]) == (2, 0)
    with pg_engine.begin() as conn:
        with pbox.guard(conn, consumer="billing", command_id="c-2", payload={"n": 99}) as entry:
            assert not entry.duplicate
    status, told, _ = _cli(capsys, "explain", *db, "billing", "c-2")
    assert told["verdict"] == "duplicate"
    assert told["quarantine"][0]["record"]["status"] == "resolved"


def test_p11_purge_dry_run_counts_droppable_partitions_and_names_the_flags(
    pg_engine: Engine, pg_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Evidence claimed ten days ago expired eight days ago: the dry run
    counts the rows of the partitions a purge would drop; without
    ``--partitioning`` the command refuses in flags, not in Python."""
    past = FakeClock(dt.datetime.now(dt.UTC) - dt.timedelta(days=10))
    box = inboxguard.Inbox(
        pg_engine, retention=HORIZON, table_prefix=prefix, partitioning="daily", clock=past
    )
    box.create_schema()
    try:
        fill_for_operators(box)
        db = ["--db", pg_url, "--prefix", prefix]
        status, _, err = _cli(capsys, "purge", "--dry-run", *db)
        assert status == 2
        assert "is partitioned by expiry" in err
        assert "pass --partitioning <the granularity it was created with> --horizon" in err
        assert "Inbox(" not in err
        flags = ["--partitioning", "daily", "--horizon", "2d", "--json"]
        status, plan, _ = _cli(capsys, "purge", "--dry-run", *db, *flags)
        assert status == 0
        assert (plan["dry_run"], plan["expired"]) == (True, 3)
        assert len(where_rows(pg_engine, box)) == 3  # a dry run drops nothing
    finally:
        box.drop_schema()


APP = """
import datetime as dt
from sqlalchemy import create_engine
import inboxguard

engine = create_engine({url!r}{options})
inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=2), table_prefix={prefix!r},
                         partitioning="daily")
"""


def _app(tmp_path: Path, url: str, prefix: str, options: str = "") -> str:
    name = unique("proj")
    source = APP.format(url=url, prefix=prefix, options=options)
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    return f"{name}:inbox"


@pytest.fixture
def in_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


def _checks(capsys: pytest.CaptureFixture[str], app: str) -> tuple[int, dict[str, list[Any]]]:
    status, report, _ = _cli(capsys, "doctor", "--app", app, "--json")
    by_check: dict[str, list[Any]] = {}
    for check in report["checks"]:
        by_check.setdefault(check["check"], []).append((check["status"], check["detail"]))
    return status, by_check


def test_p11_doctor_reports_partitions_default_rows_and_isolation(
    in_project: Path,
    pg_engine: Engine,
    pg_url: str,
    prefix: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Partitions made ten days ago stop short of a claim made now: doctor
    warns, then warns of the claim DEFAULT caught, then is content once
    ``create_partitions()`` ran; an engine at REPEATABLE READ fails it."""
    now = dt.datetime.now(dt.UTC)
    past = FakeClock(now - dt.timedelta(days=10))
    old = inboxguard.Inbox(
        pg_engine, retention=HORIZON, table_prefix=prefix, partitioning="daily", clock=past
    )
    old.create_schema()  # partitions from 10 to 5 days ago
    try:
        app = _app(in_project, pg_url, prefix)
        expiry = f"{now + HORIZON:%Y-%m-%d}"
        status, checks = _checks(capsys, app)
        assert status == 0  # warnings only
        [(level, detail)] = checks["partitions"]
        assert level == "warn"
        assert f"6 daily partitions, {past.now:%Y-%m-%d} to " in detail
        assert f"none for {expiry}" in detail
        assert "create_partitions()" in detail

        live = inboxguard.Inbox(
            pg_engine, retention=HORIZON, table_prefix=prefix, partitioning="daily"
        )
        with pg_engine.begin() as conn:
            with live.guard(conn, consumer="billing", command_id="late", payload={}):
                pass
        assert where_rows(pg_engine, live) == {"late": f"{prefix}inbox_default"}
        status, checks = _checks(capsys, app)
        assert status == 0
        details = [d for level, d in checks["partitions"] if level == "warn"]
        assert any("DEFAULT partition holds 1 row(s)" in d for d in details), details

        live.create_partitions()
        assert where_rows(pg_engine, live) == {"late": f"{prefix}inbox_p{now + HORIZON:%Y%m%d}"}
        status, checks = _checks(capsys, app)
        assert status == 0
        [(level, detail)] = checks["partitions"]
        assert level == "ok"
        assert detail.endswith("DEFAULT partition empty")

        strict = _app(in_project, pg_url, prefix, options=", isolation_level='REPEATABLE READ'")
        status, checks = _checks(capsys, strict)
        assert status == 1
        [(level, detail)] = checks["connection"]
        assert level == "fail"
        assert "isolation REPEATABLE READ" in detail
        assert "claims only under READ COMMITTED" in detail
        # What doctor foresaw: the worker's claim is refused.
        engine = create_engine(pg_url, isolation_level="REPEATABLE READ")
        try:
            with pytest.raises(
                inboxguard.ConfigurationError, match="claims only under READ COMMITTED"
            ):
                with engine.begin() as conn:
                    with live.guard(conn, consumer="billing", command_id="rr", payload={}):
                        pass
        finally:
            engine.dispose()
    finally:
        old.drop_schema()
