"""P14-P15: the operator commands fail in one line, and never hang on a
database that does not answer.

P14: ``serve-metrics`` against a server that accepts connections and never
answers reports ``inboxguard_up 0`` within a scrape's time. P15: a malformed
URL, a missing driver, a provider factory that raises, a SQLite database
whose directory is missing and a non-UTF-8 byte in ``--reason``, ``--by`` or
``--note`` each give one line on stderr and a non-zero exit, no traceback.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "inboxguard", *argv],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        timeout=120,
        check=False,
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that completes TCP connections (the kernel's backlog) and never
    says a word: a database server that hangs."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield int(sock.getsockname()[1])


@pytest.mark.parametrize("scheme", ["postgresql+psycopg", "mysql+pymysql"])
def test_p14_serve_metrics_reports_a_silent_database_as_down(
    silent_server: int, scheme: str
) -> None:
    port = _free_port()
    url = f"{scheme}://user@127.0.0.1:{silent_server}/db"
    command = [sys.executable, "-m", "inboxguard", "serve-metrics", "--port", str(port)]
    command += ["--connect-timeout", "1"]
    env = {**os.environ, "INBOXGUARD_DB_URL": url}
    process = subprocess.Popen(command, env=env, cwd=ROOT, stderr=subprocess.PIPE)
    try:
        deadline, body = time.monotonic() + 60, ""
        while time.monotonic() < deadline and not body:
            if process.poll() is not None:
                pytest.fail(f"serve-metrics exited with {process.returncode}")
            try:
                # Prometheus gives up on a scrape after 10 s by default.
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                    body = r.read().decode()
            except urllib.error.URLError as error:
                if not isinstance(error.reason, ConnectionRefusedError):
                    raise
                time.sleep(0.1)  # not listening yet
        assert "inboxguard_up 0.0" in body
    finally:
        process.terminate()
        process.communicate(timeout=10)


def _one_line(done: subprocess.CompletedProcess[bytes]) -> str:
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode != 0, err
    assert "Traceback" not in err, err
    assert err.count("\n") == 1, err
    return err


def test_p15_bad_urls_and_missing_drivers_are_one_line(tmp_path: Path) -> None:
    for command in ("serve-metrics", "dashboard"):
        err = _one_line(_run(command, "--port", "0", "--db", "not a url"))
        assert "not a SQLAlchemy URL" in err
    err = _one_line(_run("dashboard", "--port", "0", "--db", "postgresql://u@127.0.0.1/db"))
    assert "postgresql+psycopg://" in err
    err = _one_line(
        _run("outbox", "dispatch", "--once", "--transport", "json:dumps", "--db",
             f"sqlite:///{tmp_path}/missing/dir/shop.db")
    )  # fmt: skip
    assert f"{tmp_path}/missing/dir does not exist" in err
    err = _one_line(
        _run("effects", "reconcile", "--provider", "json:loads", "--db",
             f"sqlite:///{tmp_path}/ledger.db")
    )  # fmt: skip
    assert "--provider 'json:loads' could not be made" in err


def _undecodable(raw: bytes) -> str:
    """``raw`` as Python sees a command-line argument that is not UTF-8."""
    return raw.decode("utf-8", "surrogateescape")


@pytest.mark.parametrize(
    "argv",
    [
        ["quarantine", "resolve", "1", "--reason", _undecodable(b"caf\xe9")],
        ["quarantine", "resolve", "1", "--reason", "r", "--by", _undecodable(b"\xff")],
        ["effects", "resolve", "k", "--not-applied", "--note", _undecodable(b"\xfe")],
    ],
    ids=["reason", "by", "note"],
)
def test_p15_a_byte_that_is_not_utf8_is_refused_in_one_line(
    argv: list[str], tmp_path: Path
) -> None:
    raw = [os.fsencode(a) for a in argv]
    done = subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"inboxguard", *raw, b"--db",
         os.fsencode(f"sqlite:///{tmp_path}/x.db")],
        cwd=ROOT,
        env={**os.environ, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"},
        capture_output=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    err = _one_line(done)
    assert "not UTF-8" in err
