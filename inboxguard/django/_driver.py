"""The third driver of the guard's flow: Django's connection.

It performs the very requests the SQLAlchemy drivers perform
(:mod:`inboxguard.inbox.drivers`), on the connection of the caller's
``transaction.atomic()`` block:

- :class:`Connect`: the block is checked (:func:`atomic_connection`) and the
  flow gets the SQLAlchemy dialect of Django's database;
- :class:`Execute`: the statement is compiled with that dialect, with bound
  parameters, and run on a cursor of the block's connection
  (:class:`StatementRunner`); a Django database error goes back into the flow
  as the SQLAlchemy error of its driver error, so the flow classifies busy and
  missing-table errors as it does on SQLAlchemy;
- :class:`WriteQuarantine`: the record is written through the inbox's
  SQLAlchemy engine, on a connection of its own, in a transaction of its own
  (:func:`quarantine_sync`), so it survives the rollback of the block; on
  SQLite outside WAL mode, where the block's read lock would make that write
  wait and fail, it is logged at ERROR at once instead, as the SQLAlchemy
  driver does when no connection of its own is free;
- :class:`HandOver`: the caller's block runs with the entry, and the driver
  reports whether the ``atomic()`` block is still the one the claim was made
  in (:func:`block_kept`).

Every decision, and its order, is the flow's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from typing import Any

from sqlalchemy import Executable
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from inboxguard._core.context import entry_var, session_var
from inboxguard._telemetry import Telemetry
from inboxguard.django._atomic import atomic_connection, block_kept, block_mark
from inboxguard.django._boundary import DjangoBoundary
from inboxguard.django._statements import StatementRunner, dbapi_error, sa_dialect_of
from inboxguard.inbox import InboxEntry
from inboxguard.inbox.drivers import (
    BlockExit,
    BoundaryAdvice,
    Connect,
    Execute,
    GuardFlow,
    HandOver,
    Request,
    WriteQuarantine,
    handler_span,
    log_not_written,
    quarantine_sync,
    resume,
    unexpected,
)
from inboxguard.sql.dialects.sqlite.database import journal_mode

__all__ = ["DJANGO_BOUNDARY", "drive_django", "runner_for"]

#: How a Django caller ends its transaction inside the block by mistake.
DJANGO_BOUNDARY = BoundaryAdvice(
    causes=(
        "a raw COMMIT or ROLLBACK on a cursor or on connection.connection,"
        " transaction.set_rollback(True), a closed connection, or a database error"
        " caught inside the block without its own atomic()"
    ),
    savepoint="its own nested transaction.atomic() (a savepoint)",
)


def runner_for(connection: Any) -> StatementRunner:
    """The statement runner of a Django connection (one per connection object,
    so each thread's connection keeps its compiled statements)."""
    runner: StatementRunner | None = getattr(connection, "_inboxguard_runner", None)
    if runner is None:
        runner = StatementRunner(sa_dialect_of(connection), connection.cursor)
        connection._inboxguard_runner = runner  # noqa: SLF001 - our own attribute
    return runner


def _quarantine_problem(connection: Any) -> str | None:
    """Why no other connection can commit a quarantine record now, or None.

    SQLite outside WAL mode: Django opens the block with ``BEGIN``, so the
    claim's read holds a shared lock until the block ends, and any other
    connection's commit would wait for it until its busy timeout, then fail.
    """
    if connection.vendor != "sqlite":
        return None
    with connection.cursor() as cursor:
        mode = journal_mode(cursor)
    if mode == "wal":
        return None
    return (
        f"the SQLite database is in {mode!r} journal mode, where the open atomic() block"
        " keeps every other connection from committing; enable WAL (DATABASES OPTIONS"
        " 'init_command': 'PRAGMA journal_mode=WAL')"
    )


def _execute(
    flow: GuardFlow,
    runner: StatementRunner,
    connection: Any,
    statement: Executable,
    params: Mapping[str, Any],
) -> Request | None:
    """Run one statement; a Django database error goes into the flow as the
    SQLAlchemy error of its driver error, and comes out as itself when the
    flow does not turn it into one of its own."""
    from django.db import DatabaseError

    try:
        result = runner.execute(statement, params)
    except DatabaseError as error:
        sql, args = runner.compile(statement, params)
        thrown = dbapi_error(error, sql, args, connection.Database.Error)
        try:
            return resume(flow, error=thrown)
        except DBAPIError as same:
            if same is thrown:
                raise error from None
            raise
    return resume(flow, result)


def _quarantine(
    flow: GuardFlow, request: WriteQuarantine, connection: Any, engine: Engine
) -> Request | None:
    """Write a quarantine record on a connection of its own (or log it)."""
    problem = _quarantine_problem(connection)
    if problem is not None:
        log_not_written(request.values, problem)
        return resume(flow, False)
    return resume(flow, quarantine_sync(request, engine))


@contextmanager
def drive_django(
    flow: GuardFlow,
    alias: str,
    engine: Engine,
    session: Any,
    what: str,
    flow_telemetry: Telemetry,
) -> Iterator[InboxEntry]:
    """Run a guard flow on the connection of the current ``atomic()`` block of
    ``alias``; quarantine records go through ``engine``. ``session`` is what
    :func:`inboxguard.current_session` returns inside the block."""
    with closing(flow):
        if not isinstance(resume(flow), Connect):
            unexpected(None)
        connection = atomic_connection(alias, what)
        runner = runner_for(connection)
        boundary = DjangoBoundary(alias, runner.dialect)
        kept = True
        try:
            request = resume(flow, runner.dialect)
            while request is not None:
                match request:
                    case HandOver(entry):
                        mark = block_mark(connection)
                        boundary.watch(
                            f"command {entry.command_id!r} (consumer {entry.consumer!r})"
                        )
                        token = session_var.set(session)
                        entry_var.set(entry)  # kept after the block: see current_entry()
                        try:
                            with handler_span(flow_telemetry, entry):
                                yield entry
                        except BaseException as error:
                            kept = boundary.refused is None and block_kept(mark)
                            boundary.unwatch()
                            if isinstance(error, Exception):
                                resume(flow, BlockExit(kept, error))
                            raise
                        finally:
                            session_var.reset(token)
                        kept = boundary.refused is None and block_kept(mark)
                        boundary.unwatch()
                        request = resume(flow, BlockExit(kept))
                    case Execute(statement, params):
                        request = _execute(flow, runner, connection, statement, params)
                    case WriteQuarantine():
                        request = _quarantine(flow, request, connection, engine)
                    case _:
                        unexpected(request)
        except BaseException as error:
            boundary.abandon(error, kept)
            raise
        boundary.release()
