"""asyncpg's half of :mod:`.trips`: the guard's savepoint sent in asyncpg's own round trips.

SQLAlchemy's adapter (``AsyncAdapt_asyncpg_connection``) begins a transaction
lazily too: before the first statement it starts an asyncpg ``Transaction``
(one ``BEGIN`` query) and keeps it as its ``_transaction``, whose
``commit()`` and ``rollback()`` its own ``commit()`` and ``rollback()``
await. This half owns that one object instead, for the transactions it
touches:

- **the savepoint with the ``BEGIN``**: when the adapter has not begun the
  transaction yet, the ``BEGIN`` asyncpg would send (the adapter's isolation
  level, read-only and deferrable settings) and the savepoint go as one simple
  query through the asyncpg connection's ``execute()``, which takes several
  statements when it has no arguments; the adapter's transaction is then a
  :class:`_Begun`, which commits and rolls back as asyncpg's own would;
- **the release with the ``COMMIT``**: the adapter's transaction is wrapped
  in a :class:`_Kept`, whose ``commit()`` sends ``RELEASE SAVEPOINT name;
  COMMIT``. When the release fails (the savepoint is gone, or the
  transaction failed) the server skips the ``COMMIT``; the transaction is
  rolled back and the commit raises the guard's error. Its ``rollback()``
  drops the release.

asyncpg tells, in process, whether the connection is inside a transaction
(``is_in_transaction()``, from the server's last reply) but not whether that
transaction failed: a release kept back in a failed transaction is still
refused by the server at the commit, which then raises the guard's error. A
transaction begun while the block ran is seen as a new ``_transaction`` of
the adapter. The private names relied on are the adapter's ``_transaction``,
``_started`` and ``_execute_mutex`` and, for a transaction asyncpg itself
began, the asyncpg connection's ``_top_xact``; where one is missing, the
savepoint and its release are sent as SQLAlchemy sends them.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

__all__ = ["begin_with", "fits", "flush", "keep_release", "watch_begins"]

#: SQLAlchemy's adapter module, looked up only once a program has loaded it.
_ADAPTER_MODULE = "sqlalchemy.dialects.postgresql.asyncpg"
#: The adapter's isolation levels (asyncpg's names) as asyncpg's ``BEGIN`` spells them.
_LEVELS = {
    None: "",
    "read_committed": " ISOLATION LEVEL READ COMMITTED",
    "read_uncommitted": " ISOLATION LEVEL READ UNCOMMITTED",
    "repeatable_read": " ISOLATION LEVEL REPEATABLE READ",
    "serializable": " ISOLATION LEVEL SERIALIZABLE",
}


def fits(dbapi: Any) -> bool:
    """True for SQLAlchemy's adapter of an asyncpg connection."""
    adapter = sys.modules.get(_ADAPTER_MODULE)
    asyncpg = sys.modules.get("asyncpg")
    if adapter is None or asyncpg is None:
        return False
    return isinstance(dbapi, adapter.AsyncAdapt_asyncpg_connection) and isinstance(
        getattr(dbapi, "driver_connection", None), asyncpg.Connection
    )


class _Begun:
    """The transaction begun with the guard's savepoint, as the adapter's
    ``_transaction``: it commits and rolls back as asyncpg's would."""

    __slots__ = ("con",)

    def __init__(self, con: Any) -> None:
        self.con = con

    async def commit(self) -> None:
        await self.con.execute("COMMIT;")

    async def rollback(self) -> None:
        await self.con.execute("ROLLBACK;")


class _Kept:
    """The adapter's transaction (``inner``) with the release of savepoint
    ``name`` kept back for its commit; ``lost()`` is the error a failed
    release raises."""

    __slots__ = ("con", "inner", "lost", "name")

    def __init__(self, inner: Any, con: Any, name: str, lost: Callable[[], Exception]) -> None:
        self.inner = inner
        self.con = con
        self.name = name
        self.lost = lost

    async def commit(self) -> None:
        """``RELEASE SAVEPOINT name; COMMIT`` as one query; when the release
        fails, roll back and raise the guard's error. A transaction a
        statement has ended already leaves nothing to release."""
        con = self.con
        if not con.is_in_transaction():
            await self.inner.commit()  # as the adapter would have: nothing is open
            return
        try:
            await con.execute(f"RELEASE SAVEPOINT {self.name}; COMMIT")
        except sys.modules["asyncpg"].PostgresError as error:
            await self.inner.rollback()
            raise self.lost() from error
        if getattr(con, "_top_xact", None) is self.inner:  # asyncpg's own, now committed
            con._top_xact = None  # noqa: SLF001

    async def rollback(self) -> None:
        await self.inner.rollback()


def begin_with(connection: Connection, name: str) -> bool:
    """Send the adapter's ``BEGIN`` and the savepoint as one query when the
    adapter has not begun the transaction yet; False when it has (or the
    query failed: the ordinary path then sends, and reports, it again)."""
    adapter: Any = connection.connection.dbapi_connection
    con = adapter.driver_connection
    level = _LEVELS.get(adapter.isolation_level)
    if adapter.autocommit or level is None or con.is_in_transaction():
        return False
    if getattr(adapter, "_started", True) or not hasattr(adapter, "_execute_mutex"):
        return False  # begun already (or an adapter this half does not know)
    begin = "BEGIN" + level + (" READ ONLY" if adapter.readonly else "")
    begin += " DEFERRABLE" if adapter.deferrable else ""
    try:
        sent = bool(adapter.await_(_send(adapter, con, f"{begin}; SAVEPOINT {name}")))
    except BaseException:
        # Cancelled on the way: whatever reached the server is rolled back with
        # the transaction, by whoever ends it (the pool's reset at the latest).
        _begun(adapter, con)
        raise
    if sent:
        _begun(adapter, con)
    return sent


def _begun(adapter: Any, con: Any) -> None:
    """Hand the adapter the transaction begun here, as its ``_start_transaction`` would."""
    adapter._transaction = _Begun(con)  # noqa: SLF001
    adapter._started = True  # noqa: SLF001


async def _send(adapter: Any, con: Any, command: str) -> bool:
    """Send ``command`` as one simple query, under the adapter's statement
    lock; False (the transaction rolled back) when it fails."""
    async with adapter._execute_mutex:  # noqa: SLF001
        try:
            await con.execute(command)
        except Exception:  # the ordinary path sends it again, and reports what fails
            if not con.is_closed() and con.is_in_transaction():
                with contextlib.suppress(Exception):
                    await con.execute("ROLLBACK;")
            return False
    return True


def watch_begins(conn: Connection) -> Callable[[], bool]:
    """Note the adapter's transaction now; the returned function says whether
    another one began since (the one open at the start ended in between,
    whatever ended it). Watches nest, each comparing with its own start."""
    adapter: Any = conn.connection.dbapi_connection
    start = getattr(adapter, "_transaction", None)
    return lambda: start is None or getattr(adapter, "_transaction", None) is not start


def keep_release(conn: Connection, name: str, lost: Callable[[], Exception]) -> bool:
    """Keep back the release of savepoint ``name`` for the commit; False (do
    nothing) when the connection is not inside a transaction the adapter
    began, is in autocommit, or a release is kept back already. ``lost()``
    is the error the commit raises when the release fails."""
    adapter: Any = conn.connection.dbapi_connection
    con = adapter.driver_connection
    inner = getattr(adapter, "_transaction", None)
    if adapter.autocommit or not getattr(adapter, "_started", False):
        return False
    if not con.is_in_transaction() or not _owned(inner, con):
        return False
    adapter._transaction = _Kept(inner, con, name, lost)  # noqa: SLF001
    return True


def _owned(inner: Any, con: Any) -> bool:
    """Whether ``inner`` is a transaction whose commit may be replaced: one
    begun here, or asyncpg's own top transaction of ``con``."""
    if isinstance(inner, _Begun):
        return inner.con is con
    asyncpg = sys.modules["asyncpg"]
    return isinstance(inner, asyncpg.transaction.Transaction) and (
        getattr(con, "_top_xact", None) is inner
    )


def flush(connection: Connection) -> None:
    """Send the release kept back on ``connection``, if any, as SQLAlchemy
    sends a release (raising the guard's error, the transaction rolled back,
    when it fails)."""
    adapter: Any = connection.connection.dbapi_connection
    kept = getattr(adapter, "_transaction", None)
    if not isinstance(kept, _Kept):
        return
    adapter._transaction = kept.inner  # noqa: SLF001
    if not kept.con.is_in_transaction():
        return  # a statement ended the transaction: nothing to release
    try:
        connection.exec_driver_sql(f"RELEASE SAVEPOINT {kept.name}")
    except DBAPIError as error:
        if error.connection_invalidated:
            raise
        adapter.rollback()
        raise kept.lost() from error
