"""The guard's savepoint sent in round trips the transaction makes anyway (psycopg 3, sync).

*Features:* on psycopg's sync driver, the guard's ``SAVEPOINT`` and its
``RELEASE`` cost no round trip of their own:

- **the savepoint rides with the ``BEGIN``.** psycopg begins a transaction
  lazily, sending its ``BEGIN`` just before the first statement. When the
  guard's savepoint is that first statement, its opening is kept back for
  the claim (:mod:`inboxguard.sql.opening`: ``BEGIN``, ``SAVEPOINT`` and the
  claim as one pipeline), or goes with whatever SQLAlchemy sends first as one
  simple query, ``BEGIN ...; SAVEPOINT name``, with the very ``BEGIN``
  psycopg would send (its isolation level, read-only and deferrable
  settings); the server then reports the transaction open, so psycopg sends
  no ``BEGIN`` of its own.
- **the release rides with the ``COMMIT``.** At the normal exit of the
  outermost guard of a transaction, the release is kept back when the
  connection itself shows that the block ran in the claim's transaction:
  the server's last reply reports the transaction open and healthy, psycopg
  began no transaction while the block ran (:func:`watch_begins`), and the
  connection is not in autocommit. The release then goes with the commit, by
  whatever route it comes (``session.commit()``, ``connection.commit()``, the
  driver's own ``commit()``), as one simple query ``RELEASE SAVEPOINT name;
  COMMIT``: still the database's word that the transaction committing holds
  the claim. If the savepoint is gone, the ``RELEASE`` fails, the server
  skips the rest of the query so the ``COMMIT`` never runs, the transaction
  is rolled back and the commit raises the guard's ``ConfigurationError``.
  When the connection shows anything else at the exit, the release is sent
  there and then, and a failure is raised by the guard itself.
- **the result store rides with the release.** A result store the guard
  keeps back for the release (:class:`KeptStore`) goes first in the same
  round trip, the three as one pipeline (its variant that fails unless it
  updated one row, the release, the ``COMMIT``); a statement SQLAlchemy sends
  after the block sends it first.

A kept-back release is sent first by any other savepoint command on the
connection (a later guard, a ``begin_nested()``, a rollback to a savepoint);
a rollback drops it, and so does a transaction ended by a statement (the
block's transaction was confirmed at the exit; what ended it is the caller's
to say). The shortcuts stay off where someone watches the statements (a
SQLAlchemy event listener on the connection, the engine or the dialect, or
``echo``), so what they see is what is sent; on every other driver (asyncpg, psycopg's asyncio
connection) the savepoint is sent as SQLAlchemy sends it.
"""

from __future__ import annotations

import contextvars
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from sqlalchemy import Connection, Executable
from sqlalchemy.engine import Dialect, TwoPhaseTransaction

from inboxguard.sql import opening, pg_pipeline
from inboxguard.sql.cursor import CursorStatement
from inboxguard.sql.direct import execute, watched

__all__ = [
    "KeptStore",
    "armed",
    "flush",
    "healthy",
    "install",
    "keep_release",
    "send_store",
    "shares_round_trips",
    "watch_begins",
]


class KeptStore(NamedTuple):
    """A statement run after the block, kept back for the release to carry
    (:meth:`inboxguard.sql.boundary.Boundary.keep_for_commit`)."""

    #: The statement as the flow asked for it (sent alone, its row count checked).
    statement: Executable
    #: Its variant that fails unless it changed one row, compiled for the dialect.
    checked: CursorStatement
    params: dict[str, Any]
    #: The error when it changed another number of rows than one.
    vanished: Callable[[int], Exception]


#: The SQLAlchemy connection whose next savepoint command may ride along, and,
#: for a release, the error the commit raises when the release fails and the
#: result store it carries.
_ARMED: contextvars.ContextVar[
    tuple[Connection, Callable[[], Exception] | None, KeptStore | None] | None
] = contextvars.ContextVar("inboxguard_pg_trips", default=None)
#: Per driver connection: the savepoint whose release rides with the commit,
#: the error a failed release raises, and the result store sent before it.
_PENDING: weakref.WeakKeyDictionary[Any, tuple[str, Callable[[], Exception], KeptStore | None]] = (
    weakref.WeakKeyDictionary()
)
#: SQLSTATE: division by zero, the kept result store's failed check.
_NOT_ONE_ROW = "22012"
_INSTALLED: weakref.WeakSet[Dialect] = weakref.WeakSet()
_INSTALLING = threading.Lock()
#: The driver methods replaced on a connection while a release is kept back.
_KEPT_VERBS = ("commit", "rollback", "_get_tx_start_command")


def shares_round_trips(conn: Connection) -> bool:
    """True when ``conn`` is on psycopg's sync driver and nothing watches its
    statements (:func:`inboxguard.sql.direct.watched`), so the guard's
    savepoint may ride with ``BEGIN`` and ``COMMIT``."""
    if watched(conn):
        return False
    psycopg = sys.modules.get("psycopg")
    if psycopg is None:
        return False
    return type(conn.connection.dbapi_connection) is psycopg.Connection


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
        flush(connection)
        arm = _ARMED.get()
        if arm is not None and arm[0] is connection and _begin_with(connection, name):
            return
        savepoint(connection, name)

    def do_release_savepoint(connection: Connection, name: str) -> None:
        if _unopened(connection, name):
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
        if _unopened(connection, name):
            return
        flush(connection)
        rollback_to(connection, name)

    def before(execute: Callable[..., Any]) -> Callable[..., Any]:
        def do_execute(cursor: Any, *args: Any, **kwargs: Any) -> Any:
            if opening.kept_any():  # a statement comes before the claim: open the savepoint first
                _open_kept(cursor.connection)
            if _PENDING:  # a statement after the block: the result store goes first
                _store_first(cursor.connection)
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
    """Note every transaction psycopg begins on ``conn`` from now on; the
    returned function stops watching and says whether one began (the
    transaction open at the start ended in between, whatever ended it).
    Watches nest: an inner one passes each begin on to the outer."""
    dbapi: Any = conn.connection.dbapi_connection
    _open_kept(dbapi)  # the block starts before any statement: open the savepoint now
    began: list[bool] = []
    outer = dbapi.__dict__.get("_get_tx_start_command")
    start = outer or (lambda: type(dbapi)._get_tx_start_command(dbapi))  # noqa: SLF001

    def begin() -> bytes:
        began.append(True)
        return start()  # type: ignore[no-any-return]

    dbapi._get_tx_start_command = begin  # noqa: SLF001

    def stop() -> bool:
        if outer is None:
            dbapi.__dict__.pop("_get_tx_start_command", None)
        else:
            dbapi._get_tx_start_command = outer  # noqa: SLF001
        return bool(began)

    return stop


def keep_release(
    conn: Connection, name: str, lost: Callable[[], Exception], store: KeptStore | None = None
) -> bool:
    """Keep back the release of savepoint ``name`` for the commit; False (do
    nothing) when the server's last reply did not show the transaction open
    and healthy, the connection is in autocommit, the transaction is a
    two-phase one, or a release is kept back already. ``lost()`` is the error
    the commit raises when the release fails; ``store`` goes before the
    release, in the same round trip."""
    dbapi: Any = conn.connection.dbapi_connection
    if dbapi in _PENDING or not healthy(conn):
        return False
    if isinstance(conn.get_transaction(), TwoPhaseTransaction):
        return False  # its PREPARE and COMMIT PREPARED would never carry the release
    _PENDING[dbapi] = (name, lost, store)
    start = type(dbapi)._get_tx_start_command  # noqa: SLF001

    def begin() -> bytes:  # the kept transaction ended by a statement: nothing to release
        _drop(dbapi)
        return start(dbapi)  # type: ignore[no-any-return]

    dbapi.commit = lambda: _release(dbapi, b"; COMMIT")
    dbapi.rollback = lambda: _rollback(dbapi)
    dbapi._get_tx_start_command = begin  # noqa: SLF001
    return True


def healthy(conn: Connection) -> bool:
    """Whether the server's last reply on ``conn`` reports its transaction
    open and healthy, outside autocommit."""
    psycopg = sys.modules["psycopg"]
    dbapi: Any = conn.connection.dbapi_connection
    status = dbapi.pgconn.transaction_status
    return not dbapi.autocommit and status == psycopg.pq.TransactionStatus.INTRANS


def flush(connection: Connection) -> None:
    """Send what is kept back on ``connection``: a savepoint's opening (with
    its ``BEGIN``), or a release (raising the guard's error, the transaction
    rolled back, when it fails)."""
    if not _PENDING and not opening.kept_any():
        return
    dbapi: Any = connection.connection.dbapi_connection
    _open_kept(dbapi)
    if dbapi in _PENDING:
        _release(dbapi, b"")


def _open_kept(dbapi: Any) -> None:
    """Send the savepoint opening kept back on ``dbapi``, if any, with its ``BEGIN``."""
    name = opening.drop(dbapi)
    if name is not None:
        _open_now(dbapi, name)


def _unopened(connection: Connection, name: str) -> bool:
    """True (and nothing kept back any more) when savepoint ``name``'s opening
    was still kept back: no statement ran in it, so there is nothing to
    release or roll back, and nothing was begun."""
    if not opening.kept_any():
        return False
    dbapi: Any = connection.connection.dbapi_connection
    if opening.kept(dbapi) != name:
        return False
    opening.drop(dbapi)
    return True


def _begin_with(connection: Connection, name: str) -> bool:
    """Keep the savepoint's opening back for the transaction's first
    statement (:mod:`inboxguard.sql.opening`), when psycopg has not begun the
    transaction yet; False when it has."""
    psycopg = sys.modules["psycopg"]
    dbapi: Any = connection.connection.dbapi_connection
    idle = psycopg.pq.TransactionStatus.IDLE
    if dbapi.autocommit or dbapi.pgconn.transaction_status != idle:
        return False
    if not pg_pipeline.usable(dbapi):  # the claim could not ride: send the opening now
        return _open_now(dbapi, name)
    opening.keep(dbapi, name)
    return True


def _open_now(dbapi: Any, name: str) -> bool:
    """Send psycopg's ``BEGIN`` and the savepoint as one query; False when the
    query failed (the ordinary path then sends, and reports, it again)."""
    idle = sys.modules["psycopg"].pq.TransactionStatus.IDLE
    command = dbapi._get_tx_start_command() + b"; SAVEPOINT " + name.encode()  # noqa: SLF001
    if _sent(dbapi, command):
        return True
    if dbapi.pgconn.transaction_status != idle:
        type(dbapi).rollback(dbapi)
    return False


def _release(dbapi: Any, then: bytes) -> None:
    """Send the kept-back release, and ``then`` in the same query; when the
    release fails, roll back and raise the guard's error. A transaction a
    statement has ended already leaves nothing to release. A result store
    kept with it goes first, the three as one pipeline (:func:`_carried`)."""
    psycopg = sys.modules["psycopg"]
    name, lost, store = _drop(dbapi)
    if dbapi.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        return
    if store is not None:
        _carried(dbapi, store, name, lost, then)
        return
    if _sent(dbapi, b"RELEASE SAVEPOINT " + name.encode() + then):
        return  # after a COMMIT the server is outside the transaction: psycopg sends nothing
    type(dbapi).rollback(dbapi)
    raise lost()


def _carried(
    dbapi: Any, store: KeptStore, name: str, lost: Callable[[], Exception], then: bytes
) -> None:
    """Send the result store's checked variant, the release and (``then``)
    the ``COMMIT`` as one pipeline. A failed step skips the rest, so nothing
    commits; the transaction is rolled back and the store's error (its row
    gone: ``store.vanished``), or the release's (``lost``), is raised."""
    statement = pg_pipeline.Prepared(dbapi, store.checked.sql, store.checked.args(store.params))
    steps: list[pg_pipeline.Step] = [statement, b"RELEASE SAVEPOINT " + name.encode()]
    if then:
        steps.append(b"COMMIT")
    results = pg_pipeline.send(dbapi, steps)
    failed = pg_pipeline.failed(results)
    if failed is None:
        return
    type(dbapi).rollback(dbapi)
    if results[0] is not failed:
        raise lost()
    if pg_pipeline.state_of(failed) == _NOT_ONE_ROW:
        raise store.vanished(0)
    if pg_pipeline.state_of(failed) == pg_pipeline.NO_SUCH_STATEMENT:
        pg_pipeline.forget(dbapi)  # the next store prepares it again; this one is lost
    raise pg_pipeline.error_of(dbapi, failed)


def _store_first(dbapi: Any) -> None:
    """Send the result store kept back with a release on ``dbapi``, if any,
    before a statement of the caller's (which might end the transaction):
    the release stays kept back."""
    name, lost, store = _PENDING.get(dbapi) or ("", None, None)
    if store is None or lost is None:
        return
    _PENDING[dbapi] = (name, lost, None)
    checked = store.checked
    statement = pg_pipeline.Prepared(dbapi, checked.sql, checked.args(store.params))
    failed = pg_pipeline.failed(pg_pipeline.send(dbapi, [statement]))
    if failed is None:
        return
    if pg_pipeline.state_of(failed) == _NOT_ONE_ROW:
        raise store.vanished(0)
    raise pg_pipeline.error_of(dbapi, failed)


def send_store(connection: Connection, store: KeptStore) -> None:
    """Send a result store kept back for a release that is not kept back after
    all, as the flow sends it, checking that it changed one row."""
    stored: Any = execute(connection, store.statement, store.params)
    if stored.rowcount != 1:
        raise store.vanished(stored.rowcount)


def _rollback(dbapi: Any) -> None:
    _drop(dbapi)
    type(dbapi).rollback(dbapi)


def _drop(dbapi: Any) -> tuple[str, Callable[[], Exception], KeptStore | None]:
    kept = _PENDING.pop(dbapi)
    for verb in _KEPT_VERBS:
        dbapi.__dict__.pop(verb, None)
    return kept


def _sent(dbapi: Any, command: bytes) -> bool:
    """Send ``command`` (one or more statements, no parameters) as one simple
    query; True when every statement in it succeeded. A broken connection
    raises psycopg's error."""
    psycopg = sys.modules["psycopg"]
    ok = psycopg.pq.ExecStatus.COMMAND_OK
    with dbapi.lock:
        dbapi.pgconn.send_query(command)
        results = dbapi.wait(psycopg.generators.execute(dbapi.pgconn))
    return bool(results) and all(result.status == ok for result in results)
