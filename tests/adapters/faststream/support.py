"""In-process helpers of the FastStream suite: a real broker started inside the
test's event loop, and polling with a deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any


async def eventually(predicate: Callable[[], object], what: str, timeout: float = 20) -> None:
    """Poll ``predicate`` until it is truthy; fail naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


@asynccontextmanager
async def started(broker: Any) -> AsyncIterator[Any]:
    """Connect and start ``broker``'s subscribers; always stop it."""
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()
