"""psycopg's half of :mod:`.trips`: the guard's savepoint sent in psycopg's own round trips.

psycopg (3, the sync ``Connection``) begins a transaction lazily, sending its
``BEGIN`` just before the first statement; the server's last reply tells, in
process, whether the connection is idle, in a healthy transaction or in a
failed one (``pgconn.transaction_status``). Everything here is sent as one
simple query on the driver connection (``pgconn.send_query``), so several
statements share a round trip. A kept-back release lives in
:data:`_PENDING`, and the driver methods that settle it (``commit``,
``rollback``, ``_get_tx_start_command``) are replaced on the connection
instance while it waits.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection

__all__ = ["begin_with", "fits", "flush", "keep_release", "watch_begins"]

#: Per driver connection: the savepoint whose release rides with the commit,
#: and the error a failed release raises.
_PENDING: weakref.WeakKeyDictionary[Any, tuple[str, Callable[[], Exception]]] = (
    weakref.WeakKeyDictionary()
)
#: The driver methods replaced on a connection while a release is kept back.
_KEPT_VERBS = ("commit", "rollback", "_get_tx_start_command")


def fits(dbapi: Any) -> bool:
    """True for psycopg's sync connection (not its asyncio one, nor a subclass)."""
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and type(dbapi) is psycopg.Connection


def begin_with(connection: Connection, name: str) -> bool:
    """Send psycopg's ``BEGIN`` and the savepoint as one query when psycopg
    has not begun the transaction yet; False when it has (or the query failed:
    the ordinary path then sends, and reports, it again)."""
    psycopg = sys.modules["psycopg"]
    dbapi: Any = connection.connection.dbapi_connection
    idle = psycopg.pq.TransactionStatus.IDLE
    if dbapi.autocommit or dbapi.pgconn.transaction_status != idle:
        return False
    command = dbapi._get_tx_start_command() + b"; SAVEPOINT " + name.encode()  # noqa: SLF001
    if _sent(dbapi, command):
        return True
    if dbapi.pgconn.transaction_status != idle:
        type(dbapi).rollback(dbapi)
    return False


def watch_begins(conn: Connection) -> Callable[[], bool]:
    """Note every transaction psycopg begins on ``conn`` from now on; the
    returned function stops watching and says whether one began (the
    transaction open at the start ended in between, whatever ended it).
    Watches nest: an inner one passes each begin on to the outer."""
    dbapi: Any = conn.connection.dbapi_connection
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


def keep_release(conn: Connection, name: str, lost: Callable[[], Exception]) -> bool:
    """Keep back the release of savepoint ``name`` for the commit; False (do
    nothing) when the server's last reply did not show the transaction open
    and healthy, the connection is in autocommit, or a release is kept back
    already. ``lost()`` is the error the commit raises when the release fails."""
    psycopg = sys.modules["psycopg"]
    dbapi: Any = conn.connection.dbapi_connection
    status = dbapi.pgconn.transaction_status
    if dbapi in _PENDING or dbapi.autocommit or status != psycopg.pq.TransactionStatus.INTRANS:
        return False
    _PENDING[dbapi] = (name, lost)
    start = type(dbapi)._get_tx_start_command  # noqa: SLF001

    def begin() -> bytes:  # the kept transaction ended by a statement: nothing to release
        _drop(dbapi)
        return start(dbapi)  # type: ignore[no-any-return]

    dbapi.commit = lambda: _release(dbapi, b"; COMMIT")
    dbapi.rollback = lambda: _rollback(dbapi)
    dbapi._get_tx_start_command = begin  # noqa: SLF001
    return True


def flush(connection: Connection) -> None:
    """Send the release kept back on ``connection``, if any (raising the
    guard's error, the transaction rolled back, when it fails)."""
    if not _PENDING:
        return
    dbapi: Any = connection.connection.dbapi_connection
    if dbapi in _PENDING:
        _release(dbapi, b"")


def _release(dbapi: Any, then: bytes) -> None:
    """Send the kept-back release, and ``then`` in the same query; when the
    release fails, roll back and raise the guard's error. A transaction a
    statement has ended already leaves nothing to release."""
    psycopg = sys.modules["psycopg"]
    name, lost = _drop(dbapi)
    if dbapi.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        return
    if _sent(dbapi, b"RELEASE SAVEPOINT " + name.encode() + then):
        return  # after a COMMIT the server is outside the transaction: psycopg sends nothing
    type(dbapi).rollback(dbapi)
    raise lost()


def _rollback(dbapi: Any) -> None:
    _drop(dbapi)
    type(dbapi).rollback(dbapi)


def _drop(dbapi: Any) -> tuple[str, Callable[[], Exception]]:
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
