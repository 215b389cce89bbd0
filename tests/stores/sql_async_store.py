"""The asyncio SQL stores: :meth:`inboxguard.Inbox.guard_async` in an
``AsyncSession`` on SQLite (aiosqlite), PostgreSQL (asyncpg) and MariaDB
(aiomysql), each with a table prefix of its own.

The conformance suite is written in plain ``with`` blocks; this harness runs
each async step on an event loop of the calling thread (an
``asyncio.Runner`` per thread, with an ``AsyncEngine`` of its own that pools
nothing, so no connection crosses loops).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any, TypeVar

import pytest
from sqlalchemy import create_engine, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.pool import NullPool

from inboxguard import Inbox
from inboxguard.testing.conformance import run_in_threads
from tests.conftest import unique
from tests.stores.sql_store import SqlStore

__all__ = ["AsyncSqlStore", "sql_async_store"]

T = TypeVar("T")

_ASYNC_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "mysql": "mysql+aiomysql",
}


class _Loop:
    """One thread's event loop and async engine."""

    def __init__(self, url: str) -> None:
        self.runner = asyncio.Runner()
        self.engine: AsyncEngine = create_async_engine(url, poolclass=NullPool)

    def close(self) -> None:
        self.runner.run(self.engine.dispose())
        self.runner.close()


class AsyncSqlStore(SqlStore):
    """The SQL store whose deliveries run through the asyncio guard."""

    def __init__(self, name: str, sync_url: str, async_url: str, prefix: str) -> None:
        super().__init__(name, create_engine(sync_url), prefix)
        self.async_url = async_url
        self._local = threading.local()
        self._loops: list[_Loop] = []
        self._lock = threading.Lock()

    def _loop(self) -> _Loop:
        loop: _Loop | None = getattr(self._local, "loop", None)
        if loop is None:
            loop = self._local.loop = _Loop(self.async_url)
            with self._lock:
                self._loops.append(loop)
        return loop

    def _run(self, step: Coroutine[Any, Any, T]) -> T:
        return self._loop().runner.run(step)

    @contextmanager
    def _blocking(self, manager: AbstractAsyncContextManager[T]) -> Iterator[T]:
        """An async context manager, entered and exited on this thread's loop."""
        value = self._run(manager.__aenter__())
        try:
            yield value
        except BaseException as error:
            if not self._run(manager.__aexit__(type(error), error, error.__traceback__)):
                raise
        else:
            self._run(manager.__aexit__(None, None, None))

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """An AsyncSession inside ``session.begin()``."""
        session = AsyncSession(self._loop().engine)
        try:
            with self._blocking(session.begin()):
                yield session
        finally:
            self._run(session.close())

    def guard(
        self,
        inbox: Inbox,
        tx: Any,
        *,
        consumer: str,
        command_id: str,
        payload: Any,
        sent_at: Any = None,
    ) -> Any:
        """``Inbox.guard_async`` on the AsyncSession."""
        return self._blocking(
            inbox.guard_async(
                tx, consumer=consumer, command_id=command_id, payload=payload, sent_at=sent_at
            )
        )

    def guard_batch(
        self, inbox: Inbox, tx: Any, *, consumer: str, commands: list[tuple[str, Any]]
    ) -> Any:
        """``Inbox.guard_batch_async`` on the AsyncSession."""
        return self._blocking(inbox.guard_batch_async(tx, consumer=consumer, commands=commands))

    def mutate(self, tx: Any, command_id: str, amount: int) -> None:
        """Insert a ledger row in the AsyncSession's transaction."""
        self._run(tx.execute(self.ledger.insert().values(command_id=command_id, amount=amount)))

    def run_concurrently(self, n: int, fn: Callable[[], Any]) -> list[Any | BaseException]:
        """Threads, each with its own loop and async engine (closed when it ends)."""

        def own_loop() -> Any:
            try:
                return fn()
            finally:
                loop = getattr(self._local, "loop", None)
                if loop is not None:
                    self._local.loop = None
                    with self._lock:
                        self._loops.remove(loop)
                    loop.close()

        return run_in_threads(n, own_loop)

    def drop(self) -> None:
        """Close every loop, then drop the tables."""
        for loop in self._loops:
            loop.close()
        self._loops.clear()
        super().drop()


_URL_FIXTURES = {"sqlite": "sqlite_url", "postgresql": "pg_url", "mysql": "mysql_url"}


def sql_async_store(database: str) -> Callable[[pytest.FixtureRequest], Any]:
    """The factory of the asyncio SQL store on ``database`` (sqlite, postgresql, mysql)."""

    @contextmanager
    def factory(request: pytest.FixtureRequest) -> Iterator[AsyncSqlStore]:
        # The URL fixtures call require_service for the server databases.
        url = str(request.getfixturevalue(_URL_FIXTURES[database]))
        async_url = make_url(url).set(drivername=_ASYNC_DRIVERS[database])
        rendered = async_url.render_as_string(hide_password=False)
        store = AsyncSqlStore(f"sql-async-{database}", url, rendered, unique("a") + "_")
        try:
            yield store
        finally:
            store.drop()
            store.engine.dispose()

    return factory
