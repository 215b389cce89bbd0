"""The demo's brokers and the worker threads that consume from them.

Every delivery a scenario makes travels as a message: published, received by
one of the worker threads, handed to the handler, then acked. The in-memory
broker is the default; ``redis://`` and ``amqp://`` URLs go through kombu
(imported only then), on a queue of the demo's own that is deleted at the end.
"""

from __future__ import annotations

import importlib
import json
import queue
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Protocol

__all__ = ["Broker", "Workers", "broker_for"]

Run = Callable[[Mapping[str, Any]], str]


class Broker(Protocol):
    """Publish a JSON body; hand received ones to ``on_message`` until closed."""

    name: str

    def publish(self, body: dict[str, Any]) -> None:
        """Send one message."""

    def consume(self, on_message: Callable[[dict[str, Any]], None], stop: threading.Event) -> None:
        """Receive messages in this thread, acking each after ``on_message``, until ``stop``."""

    def close(self) -> None:
        """Release the connection and the queue."""


class MemoryBroker:
    """An in-memory queue with explicit acks (an unacked message is put back)."""

    name = "in-memory broker"

    def __init__(self) -> None:
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue()

    def publish(self, body: dict[str, Any]) -> None:
        """Send one message (a JSON round trip, as a real broker would)."""
        self._queue.put(json.loads(json.dumps(body)))

    def consume(self, on_message: Callable[[dict[str, Any]], None], stop: threading.Event) -> None:
        """Receive until ``stop``; a message whose handling raised goes back."""
        while not stop.is_set():
            try:
                body = self._queue.get(timeout=0.05)
            except queue.Empty:
                continue
            try:
                on_message(body)
            except BaseException:
                self._queue.put(body)  # not acked: delivered again
                raise

    def close(self) -> None:
        """Nothing to release."""


class KombuBroker:
    """A queue on Redis or RabbitMQ through kombu (one connection per thread)."""

    def __init__(self, url: str) -> None:
        # Only the --broker variant needs kombu (untyped: held as Any).
        kombu: Any = importlib.import_module("kombu")
        self._kombu = kombu
        self.url = url
        self.name = f"kombu on {url.split('://', 1)[0]}"
        self.queue_name = f"inboxguard-demo-{uuid.uuid4().hex[:10]}"
        self._lock = threading.Lock()
        self._conn = kombu.Connection(url, connect_timeout=5)
        self._conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0.2)
        self._out = self._conn.SimpleQueue(self.queue_name)

    def publish(self, body: dict[str, Any]) -> None:
        """Send one message (JSON)."""
        with self._lock:
            self._out.put(body, serializer="json")

    def consume(self, on_message: Callable[[dict[str, Any]], None], stop: threading.Event) -> None:
        """Receive on a connection of this thread's own; ack after handling."""
        with self._kombu.Connection(self.url) as conn, conn.SimpleQueue(self.queue_name) as inq:
            while not stop.is_set():
                try:
                    message = inq.get(block=True, timeout=0.05)
                except inq.Empty:
                    continue
                try:
                    on_message(message.payload)
                except BaseException:
                    message.requeue()
                    raise
                message.ack()

    def close(self) -> None:
        """Delete the demo's queue and close the connection."""
        with self._lock:
            self._out.clear()
            queue_ = getattr(self._out, "queue", None)
            if queue_ is not None:
                queue_(self._conn.default_channel).delete()
            self._out.close()
            self._conn.close()


def broker_for(url: str | None) -> Broker:
    """The in-memory broker (None), or kombu for a ``redis://`` / ``amqp://`` URL.

    Raises:
        ValueError: another scheme.
    """
    if url is None:
        return MemoryBroker()
    if not url.startswith(("redis://", "rediss://", "amqp://", "amqps://", "pyamqp://")):
        msg = f"--broker takes a redis:// or amqp:// URL, got {url!r}"
        raise ValueError(msg)
    return KombuBroker(url)


class Workers:
    """Real worker threads consuming the broker; :meth:`deliver` is the kit's courier."""

    def __init__(self, broker: Broker, count: int = 2) -> None:
        self.broker = broker
        self._stop = threading.Event()
        self._pending: dict[str, tuple[Run, threading.Event, list[str]]] = {}
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._work, name=f"demo-worker-{i}", daemon=True)
            for i in range(count)
        ]
        for thread in self._threads:
            thread.start()

    def deliver(self, message: Mapping[str, Any], run: Run) -> str:
        """Publish one delivery, wait for a worker to handle it; return its outcome."""
        ticket = uuid.uuid4().hex
        done: threading.Event = threading.Event()
        outcome: list[str] = []
        with self._lock:
            self._pending[ticket] = (run, done, outcome)
        self.broker.publish({"ticket": ticket, "body": dict(message)})
        if not done.wait(60):
            msg = f"no worker handled delivery {ticket} within 60 s ({self.broker.name})"
            raise TimeoutError(msg)
        return outcome[0]

    def _work(self) -> None:
        self.broker.consume(self._handle, self._stop)

    def _handle(self, envelope: dict[str, Any]) -> None:
        with self._lock:
            run, done, outcome = self._pending.pop(envelope["ticket"])
        try:
            outcome.append(run(envelope["body"]))
        finally:
            done.set()

    def stop(self) -> None:
        """Stop the threads and close the broker."""
        self._stop.set()
        for thread in self._threads:
            thread.join(10)
        self.broker.close()
