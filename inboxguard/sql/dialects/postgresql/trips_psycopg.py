"""psycopg's half of :mod:`.trips`: the guard's savepoint sent in psycopg's own round trips.

psycopg 3 (its sync ``Connection``, and its ``AsyncConnection`` under
SQLAlchemy's asyncio adapter) begins a transaction lazily, sending its
``BEGIN`` just before the first statement; the server's last reply tells, in
process, whether the connection is idle, in a healthy transaction or in a
failed one (``pgconn.transaction_status``). Everything here is sent as one
simple query on the psycopg connection (``pgconn.send_query``), so several
statements share a round trip. A kept-back release lives in
:data:`_PENDING`, and the psycopg methods that settle it (``commit``,
``rollback``, ``_get_tx_start_command``) are replaced on the connection
instance while it waits: coroutine functions on an ``AsyncConnection``,
which SQLAlchemy's adapter awaits. Outside a coroutine (the dialect's
savepoint commands run in SQLAlchemy's greenlet) an ``AsyncConnection`` is
awaited with the adapter's own ``await_``.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection

from inboxguard.sql import opening, pg_pipeline
from inboxguard.sql.dialects.postgresql import trips_store
from inboxguard.sql.dialects.postgresql.trips_store import KeptStore

__all__ = [
    "before_statement",
    "begin_with",
    "fits",
    "flush",
    "healthy_sync",
    "keep_release",
    "kept_any",
    "unopened",
    "watch_begins",
]

#: Per psycopg connection: the savepoint whose release rides with the commit,
#: the error a failed release raises, and the result store it carries (sync only).
_PENDING: weakref.WeakKeyDictionary[Any, tuple[str, Callable[[], Exception], KeptStore | None]] = (
    weakref.WeakKeyDictionary()
)
#: The psycopg methods replaced on a connection while a release is kept back.
_KEPT_VERBS = ("commit", "rollback", "_get_tx_start_command")


def fits(dbapi: Any) -> bool:
    """True for psycopg's sync connection, or SQLAlchemy's adapter of its
    asyncio one (not a subclass of either)."""
    psycopg = sys.modules.get("psycopg")
    if psycopg is None:
        return False
    if type(dbapi) is psycopg.Connection:
        return True
    return type(getattr(dbapi, "driver_connection", None)) is psycopg.AsyncConnection


def _psycopg(conn: Connection) -> tuple[Any, Callable[[Any], Any] | None]:
    """The psycopg connection under ``conn``, and the adapter's ``await_``
    when it is an ``AsyncConnection`` (None for the sync one)."""
    fairy = conn.connection
    pg = fairy.driver_connection
    if type(pg) is sys.modules["psycopg"].Connection:
        return pg, None
    return pg, fairy.dbapi_connection.await_  # type: ignore[union-attr]


def begin_with(connection: Connection, name: str) -> bool:
    """Send psycopg's ``BEGIN`` and the savepoint as one query when psycopg
    has not begun the transaction yet; False when it has (or the query failed:
    the ordinary path then sends, and reports, it again)."""
    psycopg = sys.modules["psycopg"]
    pg, await_ = _psycopg(connection)
    idle = psycopg.pq.TransactionStatus.IDLE
    if pg.autocommit or pg.pgconn.transaction_status != idle:
        return False
    if await_ is None and pg_pipeline.usable(pg):  # kept back for the claim (G35)
        opening.keep(pg, name)
        return True
    return _open_now(pg, name, await_)


def _open_now(pg: Any, name: str, await_: Callable[[Any], Any] | None = None) -> bool:
    """Send psycopg's ``BEGIN`` and the savepoint as one query; False when the
    query failed (the ordinary path then sends, and reports, it again)."""
    idle = sys.modules["psycopg"].pq.TransactionStatus.IDLE
    command = pg._get_tx_start_command() + b"; SAVEPOINT " + name.encode()  # noqa: SLF001
    if _sent(pg, command) if await_ is None else await_(_sent_async(pg, command)):
        return True
    if pg.pgconn.transaction_status != idle:
        if await_ is None:
            type(pg).rollback(pg)
        else:
            await_(type(pg).rollback(pg))
    return False


def watch_begins(conn: Connection) -> Callable[[], bool]:
    """Note every transaction psycopg begins on ``conn`` from now on; the
    returned function stops watching and says whether one began (the
    transaction open at the start ended in between, whatever ended it).
    Watches nest: an inner one passes each begin on to the outer."""
    pg, _ = _psycopg(conn)
    _open_kept(pg)  # the block starts before any statement: open the savepoint now
    began: list[bool] = []
    outer = pg.__dict__.get("_get_tx_start_command")
    start = outer or (lambda: type(pg)._get_tx_start_command(pg))  # noqa: SLF001

    def begin() -> bytes:
        began.append(True)
        return start()  # type: ignore[no-any-return]

    pg._get_tx_start_command = begin  # noqa: SLF001

    def stop() -> bool:
        if outer is None:
            pg.__dict__.pop("_get_tx_start_command", None)
        else:
            pg._get_tx_start_command = outer  # noqa: SLF001
        return bool(began)

    return stop


def keep_release(
    conn: Connection, name: str, lost: Callable[[], Exception], store: KeptStore | None = None
) -> bool:
    """Keep back the release of savepoint ``name`` for the commit; False (do
    nothing) when the server's last reply did not show the transaction open
    and healthy, the connection is in autocommit, or a release is kept back
    already. ``lost()`` is the error the commit raises when the release fails;
    ``store`` (the sync connection only) goes before it, in one pipeline."""
    pg, await_ = _psycopg(conn)
    if pg in _PENDING or not _healthy(pg) or (store is not None and await_ is not None):
        return False
    _PENDING[pg] = (name, lost, store)
    start = type(pg)._get_tx_start_command  # noqa: SLF001

    def begin() -> bytes:  # the kept transaction ended by a statement: nothing to release
        _drop(pg)
        return start(pg)  # type: ignore[no-any-return]

    if await_ is None:
        pg.commit = lambda: _release(pg, b"; COMMIT")
        pg.rollback = lambda: _rollback(pg)
    else:  # the adapter awaits what these return
        pg.commit = lambda: _release_async(pg, b"; COMMIT")
        pg.rollback = lambda: _rollback_async(pg)
    pg._get_tx_start_command = begin  # noqa: SLF001
    return True


def flush(connection: Connection) -> None:
    """Send the release kept back on ``connection``, if any (raising the
    guard's error, the transaction rolled back, when it fails)."""
    if not _PENDING and not opening.kept_any():
        return
    pg, await_ = _psycopg(connection)
    _open_kept(pg)
    if pg not in _PENDING:
        return
    if await_ is None:
        _release(pg, b"")
    else:
        await_(_release_async(pg, b""))


def _release(pg: Any, then: bytes) -> None:
    """Send the kept-back release, and ``then`` in the same query; when the
    release fails, roll back and raise the guard's error. A transaction a
    statement has ended already leaves nothing to release."""
    name, lost, store = _drop(pg)
    if _idle(pg):
        return
    if store is not None:  # the result store, the release and the COMMIT: one pipeline
        trips_store.carried(pg, store, name, lost, then)
        return
    if _sent(pg, b"RELEASE SAVEPOINT " + name.encode() + then):
        return  # after a COMMIT the server is outside the transaction: psycopg sends nothing
    type(pg).rollback(pg)
    raise lost()


async def _release_async(pg: Any, then: bytes) -> None:
    """:func:`_release` on an ``AsyncConnection`` (which never carries a store)."""
    name, lost, _ = _drop(pg)
    if _idle(pg):
        return
    if await _sent_async(pg, b"RELEASE SAVEPOINT " + name.encode() + then):
        return
    await type(pg).rollback(pg)
    raise lost()


def _rollback(pg: Any) -> None:
    _drop(pg)
    type(pg).rollback(pg)


async def _rollback_async(pg: Any) -> None:
    _drop(pg)
    await type(pg).rollback(pg)


def kept_any() -> bool:
    """Whether an opening or a release is kept back on any connection."""
    return bool(_PENDING) or opening.kept_any()


def before_statement(cursor: Any) -> None:
    """A statement SQLAlchemy sends on ``cursor``: first the savepoint
    opening kept back on its connection (before the claim), or the result
    store kept back with a release (after the block); the release stays."""
    pg = getattr(cursor, "connection", None)
    if pg is None or type(pg) is not sys.modules["psycopg"].Connection:
        return
    _open_kept(pg)
    name, lost, store = _PENDING.get(pg) or ("", None, None)
    if store is not None and lost is not None:
        _PENDING[pg] = (name, lost, None)
        trips_store.send_checked(pg, store)


def unopened(connection: Connection, name: str) -> bool:
    """True (and nothing kept back any more) when savepoint ``name``'s opening
    was still kept back: no statement ran in it, so there is nothing to
    release or roll back, and nothing was begun."""
    if not opening.kept_any():
        return False
    pg = connection.connection.driver_connection
    if opening.kept(pg) != name:
        return False
    opening.drop(pg)
    return True


def healthy_sync(dbapi: Any) -> bool:
    """Whether ``dbapi`` is psycopg's sync connection in a transaction the
    server reports open and healthy, outside autocommit."""
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and type(dbapi) is psycopg.Connection and _healthy(dbapi)


def _healthy(pg: Any) -> bool:
    status = pg.pgconn.transaction_status
    return not pg.autocommit and status == sys.modules["psycopg"].pq.TransactionStatus.INTRANS


def _open_kept(pg: Any) -> None:
    """Send the savepoint opening kept back on ``pg``, if any, with its ``BEGIN``."""
    name = opening.drop(pg)
    if name is not None:
        _open_now(pg, name)


def _idle(pg: Any) -> bool:
    idle = sys.modules["psycopg"].pq.TransactionStatus.IDLE
    return bool(pg.pgconn.transaction_status == idle)


def _drop(pg: Any) -> tuple[str, Callable[[], Exception], KeptStore | None]:
    kept = _PENDING.pop(pg)
    for verb in _KEPT_VERBS:
        pg.__dict__.pop(verb, None)
    return kept


def _sent(pg: Any, command: bytes) -> bool:
    """Send ``command`` (one or more statements, no parameters) as one simple
    query; True when every statement in it succeeded. A broken connection
    raises psycopg's error."""
    psycopg = sys.modules["psycopg"]
    with pg.lock:
        pg.pgconn.send_query(command)
        results = pg.wait(psycopg.generators.execute(pg.pgconn))
    return _ok(results)


async def _sent_async(pg: Any, command: bytes) -> bool:
    """:func:`_sent` on an ``AsyncConnection``."""
    psycopg = sys.modules["psycopg"]
    async with pg.lock:
        pg.pgconn.send_query(command)
        results = await pg.wait(psycopg.generators.execute(pg.pgconn))
    return _ok(results)


def _ok(results: Any) -> bool:
    ok = sys.modules["psycopg"].pq.ExecStatus.COMMAND_OK
    return bool(results) and all(result.status == ok for result in results)
