"""An outbox transport over an asyncio client, called by the synchronous dispatcher.

The transport owns an event loop on a daemon thread of its own. On first use
it opens its client there (a Kafka producer starts, a FastStream broker
connects), then waits for each publish to be confirmed, at most ``timeout``
seconds: a publish that times out or raises has not delivered, and the
dispatcher retries the row. :meth:`LoopTransport.close` shuts the client and
the thread. The Kafka and FastStream transports only say how to open, publish
and shut.
"""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import Coroutine
from typing import Any, ClassVar

from inboxguard.outbox import OutboxMessage

__all__ = ["LoopTransport"]


class LoopTransport(ABC):
    """``transport(message)``: publish on the transport's own loop and wait for
    the confirmation (the receipt the subclass returns)."""

    #: The name of the event loop thread.
    thread_name: ClassVar[str]

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._opened = False
        self._lock = threading.Lock()

    @abstractmethod
    async def _open(self) -> None:
        """Open the client (on the transport's loop, before the first publish)."""

    @abstractmethod
    async def _publish(self, message: OutboxMessage) -> dict[str, Any]:
        """Publish ``message``; return its receipt once the broker confirmed it."""

    @abstractmethod
    async def _shut(self) -> None:
        """Shut the client opened by :meth:`_open`."""

    def __call__(self, message: OutboxMessage) -> dict[str, Any]:
        """Publish; return a receipt once the broker has the message.

        Raises:
            Exception: whatever the client raised, or ``TimeoutError`` (not delivered).
        """
        return self._run(self._confirmed(message))

    async def _confirmed(self, message: OutboxMessage) -> dict[str, Any]:
        if not self._opened:
            await self._open()
            self._opened = True
        return await self._publish(message)

    def _run(self, coro: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
        loop = self._start()
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(self.timeout)
        except TimeoutError:
            future.cancel()
            raise

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name=self.thread_name, daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def close(self) -> None:
        """Shut the client and stop the transport's event loop thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if self._opened:
            asyncio.run_coroutine_threadsafe(self._shut(), loop).result(self.timeout)
            self._opened = False
        loop.call_soon_threadsafe(loop.stop)
        thread.join(self.timeout)
        loop.close()
        self._loop = self._thread = None
