"""The guard's ``BEGIN``, its savepoint and its first statement in one round trip (psycopg 3, sync).

*Features:* when the guard's savepoint is the first statement of the
transaction, :mod:`inboxguard.sql.dialects.postgresql.trips` keeps its
opening back for the statement that follows, the claim. The three then go to the
server as one libpq pipeline, ``BEGIN ...`` (psycopg's own, with its
isolation level, read-only and deferrable settings), ``SAVEPOINT name`` and
the claim as a server-side prepared statement, closed by one ``Sync``: one
round trip where they took two. The claim's parameters are adapted and its
rows loaded by psycopg's own adapters, as its cursor does.

- A statement SQLAlchemy sends first (through the dialect's ``do_execute``),
  another savepoint command, or the start of the guarded block sends the
  opening first, ``BEGIN ...; SAVEPOINT name`` as one query, as before. A
  commit or rollback before any statement drops it (nothing was begun);
  releasing or rolling back to that savepoint before any statement drops it
  too (it held nothing). A statement sent on the raw driver connection in
  between would begin a transaction without the savepoint, and the guard's
  release then fails with the guard's error, as for any lost savepoint.
- The claim's prepared statement has a name of inboxguard's own, derived from
  its text and parameter types, prepared in the same pipeline the first time
  on a connection, and again after psycopg deallocates its own (it sends
  ``DEALLOCATE ALL`` after a rollback, and after a ``DISCARD ALL``). When the
  server forgot it some other way, the pipeline fails with SQLSTATE 26000
  before anything but the savepoint ran; the transaction is rolled back and
  the pipeline sent again, preparing it anew.
- Any error of the pipeline is raised as psycopg's error for it, the
  transaction left as a failed claim leaves it (aborted, for the caller's
  rollback).
"""

from __future__ import annotations

import hashlib
import sys
import weakref
from collections.abc import Sequence
from typing import Any

__all__ = ["drop", "keep", "kept", "kept_any", "run"]

#: Per driver connection: the savepoint whose opening waits for the next statement.
_KEPT: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
#: Per driver connection: the names of the statements prepared on it here.
_PREPARED: weakref.WeakKeyDictionary[Any, set[bytes]] = weakref.WeakKeyDictionary()
#: The driver methods replaced on a connection while an opening is kept back.
_VERBS = ("commit", "rollback")
#: SQLSTATE: the prepared statement named does not exist.
_NO_SUCH_STATEMENT = "26000"


def kept(dbapi: Any) -> str | None:
    """The savepoint whose opening is kept back on ``dbapi``, if any."""
    if not _KEPT:
        return None
    try:
        return _KEPT.get(dbapi)
    except TypeError:  # a driver connection that takes no weak reference: never kept
        return None


def keep(dbapi: Any, name: str) -> None:
    """Keep back the opening of savepoint ``name`` (with psycopg's ``BEGIN``)
    until the next statement on ``dbapi``; psycopg has not begun the
    transaction yet."""
    _KEPT[dbapi] = name

    def commit() -> None:  # nothing was begun: nothing to commit
        drop(dbapi)
        type(dbapi).commit(dbapi)

    def rollback() -> None:
        drop(dbapi)
        type(dbapi).rollback(dbapi)

    dbapi.commit = commit
    dbapi.rollback = rollback


def drop(dbapi: Any) -> str | None:
    """Forget the opening kept back on ``dbapi`` (returned, None if none)."""
    name = _KEPT.pop(dbapi, None)
    if name is not None:
        for verb in _VERBS:
            dbapi.__dict__.pop(verb, None)
    return name


def run(dbapi: Any, sql: str, args: Any) -> tuple[list[tuple[Any, ...]], int] | None:
    """Send the opening kept back on ``dbapi`` and ``sql`` with ``args`` as
    one pipeline: the statement's rows and row count; None (the opening still
    kept back) when the connection is in psycopg's own pipeline mode. Raises
    psycopg's error when a statement of it fails."""
    name = kept(dbapi)
    if name is None or dbapi._pipeline is not None:  # noqa: SLF001
        return None
    transformer = sys.modules["psycopg.adapt"].Transformer(dbapi)
    query = sys.modules["psycopg._queries"].PostgresQuery(transformer)
    query.convert(sql, args)
    statement = (
        b"inboxguard_"
        + hashlib.sha256(query.query + repr(query.types).encode()).hexdigest()[:20].encode()
    )
    begin = type(dbapi)._get_tx_start_command(dbapi)  # noqa: SLF001
    drop(dbapi)
    for _ in range(2):
        prepared = _prepared(dbapi)
        prepare = statement not in prepared
        results = _pipeline(dbapi, begin, name.encode(), statement, query, prepare=prepare)
        result = results[-1]
        failed = _first_error(results)
        if failed is None:
            prepared.add(statement)
            transformer.set_pgresult(result)
            rows = transformer.load_rows(0, result.ntuples, tuple)
            count = result.command_tuples
            return rows, -1 if count is None else count
        if prepare or _state(failed) != _NO_SUCH_STATEMENT:
            raise _error(dbapi, failed)
        prepared.clear()  # the server forgot them: only the savepoint ran, start again
        type(dbapi).rollback(dbapi)
    raise AssertionError("unreachable: the second pass prepares the statement")


def _prepared(dbapi: Any) -> set[bytes]:
    """The statements prepared here on ``dbapi``. The first time, psycopg's
    own ``DEALLOCATE ALL`` (which it sends after a rollback once it holds
    prepared statements of its own, and after a ``DISCARD ALL``) is watched,
    so that it empties the set too."""
    found = _PREPARED.get(dbapi)
    if found is not None:
        return found
    names: set[bytes] = set()
    _PREPARED[dbapi] = names
    deallocate = type(dbapi)._deallocate  # noqa: SLF001

    def watched(name: bytes | None) -> Any:
        if name is None:
            names.clear()
        return deallocate(dbapi, name)

    dbapi._deallocate = watched  # noqa: SLF001
    return names


def _pipeline(
    dbapi: Any, begin: bytes, savepoint: bytes, statement: bytes, query: Any, *, prepare: bool
) -> Sequence[Any]:
    """One round trip: ``BEGIN``, the savepoint, [the statement's ``Parse``],
    the statement, ``Sync``; every result, the statement's last."""
    psycopg = sys.modules["psycopg"]
    pq, generators = psycopg.pq, psycopg.generators
    pgconn = dbapi.pgconn
    results: list[Any] = []
    with dbapi.lock:
        pgconn.enter_pipeline_mode()
        try:
            pgconn.send_query_params(begin, None)
            pgconn.send_query_params(b"SAVEPOINT " + savepoint, None)
            if prepare:
                pgconn.send_prepare(statement, query.query, param_types=query.types)
            pgconn.send_query_prepared(statement, query.params, param_formats=query.formats)
            pgconn.pipeline_sync()
            dbapi.wait(generators.send(pgconn))
            while True:
                got = dbapi.wait(generators.fetch_many(pgconn))
                if got and got[-1].status == pq.ExecStatus.PIPELINE_SYNC:
                    break
                results.extend(got)
        finally:
            if pgconn.status != pq.ConnStatus.BAD:
                pgconn.exit_pipeline_mode()
    return results


def _first_error(results: Sequence[Any]) -> Any | None:
    fatal = sys.modules["psycopg"].pq.ExecStatus.FATAL_ERROR
    return next((result for result in results if result.status == fatal), None)


def _state(result: Any) -> str:
    diag = sys.modules["psycopg"].pq.DiagnosticField.SQLSTATE
    return (result.error_field(diag) or b"").decode("ascii", "replace")


def _error(dbapi: Any, result: Any) -> Exception:
    errors = sys.modules["psycopg"].errors
    return errors.error_from_result(result, encoding=dbapi.info.encoding)  # type: ignore[no-any-return]


def kept_any() -> bool:
    """Whether an opening is kept back on any connection (a cheap first test)."""
    return bool(_KEPT)
