"""Helpers of the outbox tests: a deadline-based wait and a recording transport."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

import inboxguard


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy, or fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s (last value {value!r})")
        time.sleep(interval)


class Recorder:
    """A transport that records what it sends, and can be told to fail."""

    def __init__(self) -> None:
        self.sent: list[inboxguard.OutboxMessage] = []
        self.fail_with: Exception | None = None
        self.fail_for: set[str] = set()

    def __call__(self, message: inboxguard.OutboxMessage) -> dict[str, Any]:
        if self.fail_with is not None or message.command_id in self.fail_for:
            raise self.fail_with or ConnectionError("broker unreachable")
        self.sent.append(message)
        return {"seq": len(self.sent)}

    def ids(self) -> list[str]:
        return [m.command_id for m in self.sent]
