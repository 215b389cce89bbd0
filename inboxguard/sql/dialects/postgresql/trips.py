"""The guard's savepoint sent in round trips the transaction makes anyway (psycopg, asyncpg).

*Features:* on psycopg (its sync connection, and its asyncio one through
SQLAlchemy's ``AsyncConnection`` or ``AsyncSession``) and on asyncpg
(``postgresql+asyncpg``, the same way), the guard's ``SAVEPOINT`` and its
``RELEASE`` cost no round trip of their own:

- **the savepoint rides with the ``BEGIN``.** Both drivers begin a
  transaction lazily, sending their ``BEGIN`` just before the first
  statement. When the guard's savepoint is that first statement, the two go
  as one simple query, ``BEGIN ...; SAVEPOINT name``, with the very ``BEGIN``
  the driver would send (its isolation level, read-only and deferrable
  settings); the driver then holds the transaction as begun and sends no
  ``BEGIN`` of its own. On psycopg's sync connection the opening is kept back
  for the claim instead, the three sent as one pipeline
  (:mod:`inboxguard.sql.opening`, G35), or with whatever SQLAlchemy sends
  first.
- **the release rides with the ``COMMIT``.** At the normal exit of the
  outermost guard of a transaction, the release is kept back when the
  connection itself shows that the block ran in the claim's transaction:
  the server's last reply reports the transaction open (on psycopg also
  healthy; asyncpg does not tell a failed transaction from an open one), the
  driver began no transaction while the block ran (:func:`watch_begins`), and
  the connection is not in autocommit nor the transaction a two-phase one.
  The release then goes with the commit, by whatever route it comes
  (``session.commit()``, ``connection.commit()``, the driver's own
  ``commit()``), as one simple query ``RELEASE SAVEPOINT name; COMMIT``:
  still the database's word that the transaction committing holds the
  claim. If the savepoint is gone or the transaction failed, the ``RELEASE``
  fails, the server skips the rest of the query so the ``COMMIT`` never runs,
  the transaction is rolled back and the commit raises the guard's
  ``ConfigurationError``. When the connection shows anything else at the
  exit, the release is sent there and then, and a failure is raised by the
  guard itself.

On psycopg's sync connection a kept-back release also carries the result
store run after the block (:mod:`.trips_store`, G36).

A kept-back release is sent first by any other savepoint command on the
connection (a later guard, a ``begin_nested()``, a rollback to a savepoint);
a rollback drops it, and so does a transaction ended by a statement (the
block's transaction was confirmed at the exit; what ended it is the caller's
to say). The shortcuts stay off where someone watches the statements (a
SQLAlchemy event listener on the connection, the engine or the dialect, or
``echo``), so what they see is what is sent; on every other driver the
savepoint is sent as SQLAlchemy sends it.

This module decides and dispatches; each driver's half lives in a module of
its own (:mod:`.trips_psycopg`, :mod:`.trips_asyncpg`), loaded with it, and
neither imports its driver: each looks for it in ``sys.modules``.
"""

from __future__ import annotations

import contextvars
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect, TwoPhaseTransaction

from inboxguard.sql import pg_pipeline
from inboxguard.sql.dialects.postgresql import trips_asyncpg, trips_psycopg
from inboxguard.sql.dialects.postgresql.trips_store import KeptStore, send_store
from inboxguard.sql.direct import watched

__all__ = [
    "KeptStore",
    "armed",
    "carries_store",
    "flush",
    "install",
    "keep_release",
    "send_store",
    "shares_round_trips",
    "watch_begins",
]


class _Half(Protocol):
    """One driver's half (a module): see :mod:`.trips_psycopg`."""

    def fits(self, dbapi: Any) -> bool: ...  # pragma: no cover
    def begin_with(self, connection: Connection, name: str) -> bool: ...  # pragma: no cover
    def watch_begins(self, conn: Connection) -> Callable[[], bool]: ...  # pragma: no cover
    def keep_release(  # pragma: no cover
        self, conn: Connection, name: str, lost: Callable[[], Exception]
    ) -> bool: ...
    def flush(self, connection: Connection) -> None: ...  # pragma: no cover


_HALVES: tuple[_Half, ...] = (trips_psycopg, trips_asyncpg)

#: The SQLAlchemy connection whose next savepoint command may ride along, and,
#: for a release, the error the commit raises when the release fails and the
#: result store it carries.
_ARMED: contextvars.ContextVar[
    tuple[Connection, Callable[[], Exception] | None, KeptStore | None] | None
] = contextvars.ContextVar("inboxguard_pg_trips", default=None)
_INSTALLED: weakref.WeakSet[Dialect] = weakref.WeakSet()
_INSTALLING = threading.Lock()


def _half(conn: Connection) -> _Half | None:
    dbapi = conn.connection.dbapi_connection
    for half in _HALVES:
        if half.fits(dbapi):
            return half
    return None


def shares_round_trips(conn: Connection) -> bool:
    """True when ``conn`` is on psycopg (sync or asyncio) or on asyncpg and
    nothing watches its statements (:func:`inboxguard.sql.direct.watched`),
    so the guard's savepoint may ride with ``BEGIN`` and ``COMMIT``."""
    return not watched(conn) and _half(conn) is not None


def carries_store(conn: Connection) -> bool:
    """Whether a release kept back on ``conn`` may carry a result store: on
    psycopg's sync connection, in a transaction the server reports healthy,
    where prepared statements may be pipelined."""
    dbapi = conn.connection.dbapi_connection
    return trips_psycopg.healthy_sync(dbapi) and pg_pipeline.usable(dbapi)


@contextmanager
def armed(
    conn: Connection,
    lost: Callable[[], Exception] | None = None,
    store: KeptStore | None = None,
) -> Iterator[None]:
    """Let the savepoint command sent inside the ``with`` ride along: the
    guard's own savepoint (with the ``BEGIN``), or, given ``lost`` (the error
    a failed release raises at the commit), its release (with the
    ``COMMIT``), the result ``store`` sent first in the same round trip.
    :func:`install` must have run on the connection's dialect."""
    token = _ARMED.set((conn, lost, store))
    try:
        yield
    finally:
        _ARMED.reset(token)


def install(dialect: Dialect) -> None:
    """Wrap ``dialect``'s savepoint commands once (its own instance; the
    dialect class and every other engine are untouched)."""
    if dialect in _INSTALLED:
        return
    with _INSTALLING:
        if dialect not in _INSTALLED:
            _wrap(dialect)


def _wrap(dialect: Dialect) -> None:
    savepoint = dialect.do_savepoint
    release = dialect.do_release_savepoint
    rollback_to = dialect.do_rollback_to_savepoint

    def do_savepoint(connection: Connection, name: str) -> None:
        half = _half(connection)
        if half is not None:
            half.flush(connection)
            arm = _ARMED.get()
            if arm is not None and arm[0] is connection and half.begin_with(connection, name):
                return
        savepoint(connection, name)

    def do_release_savepoint(connection: Connection, name: str) -> None:
        if trips_psycopg.unopened(connection, name):
            return
        flush(connection)
        arm = _ARMED.get()
        if arm is None or arm[0] is not connection or arm[1] is None:
            release(connection, name)
            return
        if keep_release(connection, name, arm[1], arm[2]):
            return
        if arm[2] is not None:  # not kept back after all: the store goes first, alone
            send_store(connection, arm[2])
        release(connection, name)

    def do_rollback_to_savepoint(connection: Connection, name: str) -> None:
        if trips_psycopg.unopened(connection, name):
            return
        flush(connection)
        rollback_to(connection, name)

    def before(execute: Callable[..., Any]) -> Callable[..., Any]:
        def do_execute(cursor: Any, *args: Any, **kwargs: Any) -> Any:
            if trips_psycopg.kept_any():  # an opening or a result store waits: send it first
                trips_psycopg.before_statement(cursor)
            return execute(cursor, *args, **kwargs)

        return do_execute

    dialect.do_execute = before(dialect.do_execute)  # type: ignore[method-assign]
    dialect.do_execute_no_params = before(dialect.do_execute_no_params)  # type: ignore[method-assign]
    dialect.do_executemany = before(dialect.do_executemany)  # type: ignore[method-assign]
    dialect.do_savepoint = do_savepoint  # type: ignore[method-assign]
    dialect.do_release_savepoint = do_release_savepoint  # type: ignore[method-assign]
    dialect.do_rollback_to_savepoint = do_rollback_to_savepoint  # type: ignore[method-assign]
    _INSTALLED.add(dialect)


def watch_begins(conn: Connection) -> Callable[[], bool]:
    """Note every transaction the driver begins on ``conn`` from now on; the
    returned function stops watching and says whether one began (the
    transaction open at the start ended in between, whatever ended it).
    Only for a connection :func:`shares_round_trips` accepted."""
    half = _half(conn)
    if half is None:  # pragma: no cover - the caller asked shares_round_trips first
        return lambda: True
    return half.watch_begins(conn)


def keep_release(
    conn: Connection, name: str, lost: Callable[[], Exception], store: KeptStore | None = None
) -> bool:
    """Keep back the release of savepoint ``name`` for the commit; False (do
    nothing) when the connection does not show the transaction open (on
    psycopg: and healthy), the connection is in autocommit, the transaction
    is a two-phase one, or a release is kept back already. ``lost()`` is the
    error the commit raises when the release fails; ``store`` (psycopg's sync
    connection only, :func:`carries_store`) goes before the release."""
    if isinstance(conn.get_transaction(), TwoPhaseTransaction):
        return False  # its PREPARE and COMMIT PREPARED would never carry the release
    half = _half(conn)
    if half is trips_psycopg:
        return trips_psycopg.keep_release(conn, name, lost, store)
    return store is None and half is not None and half.keep_release(conn, name, lost)


def flush(connection: Connection) -> None:
    """Send the release kept back on ``connection``, if any (raising the
    guard's error, the transaction rolled back, when it fails)."""
    half = _half(connection)
    if half is not None:
        half.flush(connection)
