"""A transport for dispatcher processes that holds one send at a known point.

``--transport tests.outbox.gated_transport:send`` appends ``sending <id>`` to
the file named by ``OUTBOX_TEST_LOG`` before each send and ``sent <id>`` after
it. The send of ``OUTBOX_TEST_HOLD`` waits (up to a deadline) until the file
``OUTBOX_TEST_GATE`` exists, so a test can signal the process while that send
is in flight, then let it finish.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import inboxguard


def _log(line: str) -> None:
    with Path(os.environ["OUTBOX_TEST_LOG"]).open("a") as log:
        log.write(line + "\n")


def send(message: inboxguard.OutboxMessage) -> None:
    _log(f"sending {message.command_id}")
    if message.command_id == os.environ.get("OUTBOX_TEST_HOLD"):
        gate = Path(os.environ["OUTBOX_TEST_GATE"])
        deadline = time.monotonic() + 60
        while not gate.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{gate} never appeared")
            time.sleep(0.02)
    _log(f"sent {message.command_id}")
