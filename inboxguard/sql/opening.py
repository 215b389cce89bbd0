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

import weakref
from typing import Any

from inboxguard.sql import pg_pipeline

__all__ = ["drop", "keep", "kept", "kept_any", "run"]

#: Per driver connection: the savepoint whose opening waits for the next statement.
_KEPT: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
#: The driver methods replaced on a connection while an opening is kept back.
_VERBS = ("commit", "rollback")


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
    one pipeline: the statement's rows and row count. Where the connection
    cannot pipeline prepared statements (:func:`pg_pipeline.usable`), the
    opening alone is sent and None returned: the caller runs the statement.
    Raises psycopg's error when a statement of it fails."""
    name = drop(dbapi)
    if name is None:
        return None
    begin = type(dbapi)._get_tx_start_command(dbapi)  # noqa: SLF001
    opening: list[pg_pipeline.Step] = [begin, b"SAVEPOINT " + name.encode()]
    if not pg_pipeline.usable(dbapi):  # the savepoint now, the statement as psycopg runs it
        failed = pg_pipeline.failed(pg_pipeline.send(dbapi, opening))
        if failed is not None:
            raise pg_pipeline.error_of(dbapi, failed)
        return None
    statement = pg_pipeline.Prepared(dbapi, sql, args)
    steps = [*opening, statement]
    for attempt in range(2):
        results = pg_pipeline.send(dbapi, steps)
        failed = pg_pipeline.failed(results)
        if failed is None:
            return statement.rows(results[-1])
        if attempt or pg_pipeline.state_of(failed) != pg_pipeline.NO_SUCH_STATEMENT:
            raise pg_pipeline.error_of(dbapi, failed)
        type(dbapi).rollback(dbapi)  # the server forgot it: only the savepoint ran, start again
        pg_pipeline.forget(dbapi)
    raise AssertionError("unreachable: the second pass prepares the statement")


def kept_any() -> bool:
    """Whether an opening is kept back on any connection (a cheap first test)."""
    return bool(_KEPT)
