"""What the store conformance suite needs of a store: :class:`StoreHarness`."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from inboxguard import InboxBatch, InboxEntry, RetentionPolicy
from inboxguard._core.clock import Clock

__all__ = ["SHORT_LOCK_TIMEOUT", "StoreHarness", "run_in_threads"]

#: How long a suite lock timeout may be (see :meth:`StoreHarness.inbox`).
SHORT_LOCK_TIMEOUT = dt.timedelta(milliseconds=300)


class StoreHarness(Protocol):
    """One store, as the conformance suite sees it."""

    name: str  # e.g. "sql-postgresql", "redis", "django-sqlite"

    def inbox(self, *, retention: RetentionPolicy, clock: Clock | None = None) -> Any:
        """An inbox on this store's (shared) evidence, with a short lock timeout."""
        ...

    def transaction(self) -> AbstractContextManager[Any]:
        """One local transaction of the store (a SQLAlchemy Session in
        session.begin(), a Redis transactional pipeline, a Django atomic()
        block). Commits on normal exit, discards everything on an exception."""
        ...

    def guard(
        self,
        inbox: Any,
        tx: Any,
        *,
        consumer: str,
        command_id: str,
        payload: Any,
        sent_at: dt.datetime | None = None,
    ) -> AbstractContextManager[InboxEntry]:
        """The inbox's guard of one delivery inside ``tx``."""
        ...

    def guard_batch(
        self, inbox: Any, tx: Any, *, consumer: str, commands: list[tuple[str, Any]]
    ) -> AbstractContextManager[InboxBatch]:
        """The inbox's batch guard of ``commands`` inside ``tx`` (a store whose
        capabilities have no ``batch`` refuses it)."""
        ...

    def mutate(self, tx: Any, command_id: str, amount: int) -> None:
        """The consumer's own local change, inside tx (a row insert / an LPUSH+INCRBY)."""
        ...

    def applied(self) -> list[str]:
        """Committed mutations' command IDs, in order (read outside any tx)."""
        ...

    def evidence(self, consumer: str, command_id: str) -> dict[str, Any] | None:
        """Committed evidence: at least {"digest": str, "result": Any, "expires_at": datetime}."""
        ...

    def quarantine(self, consumer: str, command_id: str) -> list[dict[str, Any]]:
        """Quarantine records: at least {"reason": str, "incoming_digest": str}."""
        ...

    def run_concurrently(self, n: int, fn: Callable[[], Any]) -> list[Any | BaseException]:
        """Run fn in n threads at once (a barrier), return each result or exception."""
        ...


def run_in_threads(
    n: int, fn: Callable[[], Any], timeout: float = 60.0
) -> list[Any | BaseException]:
    """Start ``n`` threads that call ``fn`` together (behind a barrier) and
    return each one's result or the exception it raised, in thread order.

    A store whose transactions are thread-bound can use this as its
    ``run_concurrently``; one that needs processes provides its own.
    """
    barrier = threading.Barrier(n)
    results: list[Any | BaseException] = [None] * n

    def run(i: int) -> None:
        try:
            barrier.wait(timeout)
            results[i] = fn()
        except BaseException as error:
            results[i] = error

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
        if thread.is_alive():
            msg = f"a thread of run_in_threads still ran after {timeout}s"
            raise TimeoutError(msg)
    return results
