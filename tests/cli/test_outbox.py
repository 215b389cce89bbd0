"""``inboxguard outbox status|dispatch|retry-dead|compact`` (O8, O11)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import inboxguard
from inboxguard.cli import main
from tests.outbox.helpers import wait_until


@pytest.fixture
def box(pg_url, prefix):
    engine = create_engine(pg_url)
    outbox = inboxguard.Outbox(engine, table_prefix=prefix)
    outbox.create_schema()
    yield outbox
    outbox.drop_schema()
    engine.dispose()


def add(box, *ids):
    with Session(box.engine) as session, session.begin():
        for cid in ids:
            box.add(session, command_id=cid, destination="d", payload={"id": cid})


def cli(box, *args):
    return [
        *args,
        "--url",
        box.engine.url.render_as_string(False),
        "--table-prefix",
        box.table_prefix,
    ]


def test_o8_cli_status_reports_backlog_and_fails_when_rows_are_dead(box, capsys):
    add(box, "a", "b")
    assert main(cli(box, "outbox", "status", "--json")) == 0
    assert json.loads(capsys.readouterr().out)["backlog"] == 2

    def broken(_message):
        raise ConnectionError("down")

    with inboxguard.Dispatcher(box, broken, max_attempts=1) as dispatcher:
        dispatcher.run_once()
    assert main(cli(box, "outbox", "status")) == 1  # dead rows need an operator
    assert "dead               2" in capsys.readouterr().out

    assert main(cli(box, "outbox", "retry-dead", "--command-id", "a")) == 0
    assert "made due again: 1" in capsys.readouterr().out
    assert box.status().backlog == 1


def test_missing_url_is_a_clear_error(capsys, monkeypatch):
    monkeypatch.delenv("INBOXGUARD_DATABASE_URL", raising=False)
    assert main(["outbox", "status"]) == 2
    assert "--url" in capsys.readouterr().err


def test_o11_cli_dispatch_runs_as_a_process_and_stops_on_sigterm(box):
    add(box, "a", "b", "c")
    env = {**os.environ, "INBOXGUARD_DATABASE_URL": box.engine.url.render_as_string(False)}
    once = subprocess.run(
        [
            sys.executable,
            "-m",
            "inboxguard",
            "outbox",
            "dispatch",
            "--once",
            "--batch-size",
            "2",
            "--table-prefix",
            box.table_prefix,
            "--transport",
            "inboxguard.cli.outbox:print_transport",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    assert "delivered 2" in once.stdout
    assert box.status().backlog == 1

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inboxguard",
            "outbox",
            "dispatch",
            "--poll-interval",
            "0.1",
            "--table-prefix",
            box.table_prefix,
            "--transport",
            "inboxguard.cli.outbox:print_transport",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        wait_until(lambda: box.status().backlog == 0, timeout=30)
        proc.send_signal(signal.SIGTERM)
        out, _err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert "stopped: delivered 1" in out
    assert json.loads(out.splitlines()[0])["command_id"] == "c"


@pytest.mark.parametrize(
    ("spec", "words"),
    [("no_colon", "must look like MODULE:ATTR"), ("inboxguard.nowhere:x", "no module named")],
)
def test_dispatch_with_a_bad_transport_is_a_clear_error(box, capsys, spec, words):
    add(box, "a")
    assert main(cli(box, "outbox", "dispatch", "--once", "--transport", spec)) == 2
    assert words in capsys.readouterr().err
    row = box.get("a")  # nothing claimed, nothing lost
    assert (row.attempts, row.delivered_at) == (0, None)


def test_dispatch_builds_the_transport_from_a_factory():
    from inboxguard.cli.outbox import load_transport

    made = load_transport("tests.outbox.helpers:Recorder")  # a class needing no argument
    assert callable(made)
    assert made.sent == []


def refused_transport(message):
    """A transport whose broker refuses every message (for the report below)."""
    raise ConnectionError(f"broker refused {message.command_id}")


def test_o19_dispatch_once_reports_failed_and_dead_rows_and_fails_when_nothing_arrived(box, capsys):
    add(box, "a", "b")
    with inboxguard.Dispatcher(box, refused_transport, max_attempts=2) as dispatcher:
        dispatcher.run_once()  # "a" and "b" fail once
    add(box, "c")
    with box.engine.begin() as conn:  # make the failed rows due again now
        conn.execute(box.tables.outbox.update().values(due_at=box.clock()))
    spec = "tests.cli.test_outbox:refused_transport"
    args = ["outbox", "dispatch", "--once", "--max-attempts", "2", "--transport", spec]
    assert main(cli(box, *args)) == 1  # claimed three rows, delivered none
    out = capsys.readouterr().out
    assert "delivered 0, failed 1, dead 2, released 0" in out

    add(box, "d")
    printing = "inboxguard.cli.outbox:print_transport"
    assert main(cli(box, "outbox", "dispatch", "--once", "--transport", printing)) == 0
    assert "delivered 1, failed 0, dead 0" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args", [["--help"], ["outbox", "status"], ["outbox", "status", "--json"]], ids=" ".join
)
def test_o19_output_piped_into_a_closed_reader_ends_without_a_traceback(box, args):
    add(box, "a")
    env = {**os.environ, "INBOXGUARD_DATABASE_URL": box.engine.url.render_as_string(False)}
    if args != ["--help"]:
        args = [*args, "--table-prefix", box.table_prefix]
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `| head -0`: the reader is gone before the first write
    try:
        done = subprocess.run(
            [sys.executable, "-m", "inboxguard", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr
    assert "BrokenPipeError" not in done.stderr
    assert done.returncode in (0, 141)  # argparse's --help swallows the error itself
