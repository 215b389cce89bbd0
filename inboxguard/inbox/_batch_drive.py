"""The two drivers of :mod:`._batch_flow`: sync and asyncio, side by side.

They perform the batch flow's requests exactly as :mod:`._drive` performs
the single guard's (the caller's connection for statements, a connection of
its own for each quarantine record, in the caller's tenant schema), and run
the caller's block with the :class:`~._batch.InboxBatch`, with
:func:`inboxguard.current_session` bound. They hold the guard's savepoint as
the single guard's drivers do (:mod:`inboxguard.sql.savepoint`), opened
before the batch's first statement.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, closing, contextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from inboxguard._core.context import session_var
from inboxguard.inbox._batch import InboxBatch
from inboxguard.inbox._batch_flow import BatchFlow
from inboxguard.inbox._drive import quarantine_async, quarantine_sync
from inboxguard.inbox._flow import (
    BlockExit,
    Connect,
    Execute,
    HandOver,
    WriteQuarantine,
    resume,
    unexpected,
)
from inboxguard.sql.connection import async_connection_of, connection_of
from inboxguard.sql.direct import execute, execute_async
from inboxguard.sql.savepoint import GuardSavepoint
from inboxguard.sql.table_text import schema_options

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

__all__ = ["drive_batch_async", "drive_batch_sync"]

_ROWS = "the inbox rows could commit without the handler's changes"
_SYNC_ONLY = (
    "guard_batch() needs a sqlalchemy Session or Connection, got {type};"
    " for an AsyncSession use guard_batch_async()"
)
_ASYNC_ONLY = (
    "guard_batch_async() needs a sqlalchemy AsyncSession or AsyncConnection, got {type};"
    " for a sync Session or Connection use guard_batch()"
)


@contextmanager
def drive_batch_sync(
    flow: BatchFlow, session: Session | Connection, engine: Engine
) -> Iterator[InboxBatch]:
    """Run a batch flow on the caller's ``Session`` or ``Connection``;
    quarantine records go through ``engine``."""
    with closing(flow):
        if not isinstance(resume(flow), Connect):
            unexpected(None)
        conn = connection_of(session, wrong_type=_SYNC_ONLY, row=_ROWS)
        # Opened before the first statement on the caller's connection: a batch
        # that claims nothing (empty, or every entry refused) runs none.
        savepoint = GuardSavepoint(GuardSavepoint.orm(session), conn, lazy=True)
        try:
            request = resume(flow, conn.dialect)
            while request is not None:
                match request:
                    case HandOver(batch):
                        savepoint.enter_block(_label(batch))
                        token = session_var.set(session)
                        try:
                            yield batch
                        except BaseException as error:
                            kept = savepoint.exit_block()
                            if isinstance(error, Exception):
                                resume(flow, BlockExit(kept, error))
                            raise
                        finally:
                            session_var.reset(token)
                        request = resume(flow, BlockExit(savepoint.exit_block()))
                    case Execute(statement, params):
                        savepoint.before_statement()
                        request = _execute_sync(flow, conn, statement, params)
                    case WriteQuarantine():
                        tenant = engine.execution_options(**schema_options(conn))
                        request = resume(flow, quarantine_sync(request, tenant))
                    case _:
                        unexpected(request)
        except BaseException:
            savepoint.abandon()
            raise
        savepoint.release()


@asynccontextmanager
async def drive_batch_async(
    flow: BatchFlow, session: AsyncSession | AsyncConnection
) -> AsyncIterator[InboxBatch]:
    """Run a batch flow on the caller's ``AsyncSession`` or ``AsyncConnection``;
    quarantine records go through the session's own ``AsyncEngine``."""
    with closing(flow):
        if not isinstance(resume(flow), Connect):
            unexpected(None)
        conn = await async_connection_of(session, wrong_type=_ASYNC_ONLY, row=_ROWS)
        sync_conn: Connection = conn.sync_connection  # type: ignore[assignment]  # started
        sync_session: Session | None = getattr(session, "sync_session", None)
        savepoint = GuardSavepoint(sync_session, sync_conn, lazy=True)  # as drive_batch_sync
        try:
            request = resume(flow, conn.dialect)
            while request is not None:
                match request:
                    case HandOver(batch):
                        await savepoint.enter_block_async(conn, _label(batch))
                        token = session_var.set(session)
                        try:
                            yield batch
                        except BaseException as error:  # cancellation too
                            kept = savepoint.exit_block()
                            if isinstance(error, Exception):
                                resume(flow, BlockExit(kept, error))
                            raise
                        finally:
                            session_var.reset(token)
                        request = resume(flow, BlockExit(savepoint.exit_block()))
                    case Execute(statement, params):
                        await savepoint.before_statement_async(conn)
                        request = await _execute_async(flow, conn, statement, params)
                    case WriteQuarantine():
                        tenant = conn.engine.execution_options(**schema_options(sync_conn))
                        request = resume(flow, await quarantine_async(request, tenant))
                    case _:
                        unexpected(request)
        except BaseException:
            await savepoint.abandon_async(conn)
            raise
        await savepoint.release_async(conn)


def _execute_sync(flow: BatchFlow, conn: Connection, statement: Any, params: Any) -> Any:
    """Run one statement; its result (or its database error) goes into the flow."""
    try:
        result = execute(conn, statement, params)
    except DBAPIError as error:
        return resume(flow, error=error)
    return resume(flow, result)


async def _execute_async(
    flow: BatchFlow, conn: AsyncConnection, statement: Any, params: Any
) -> Any:
    """:func:`_execute_sync` on an ``AsyncConnection``."""
    try:
        result = await execute_async(conn, statement, params)
    except DBAPIError as error:
        return resume(flow, error=error)
    return resume(flow, result)


def _label(batch: InboxBatch) -> str:
    entries = list(batch)
    consumer = entries[0].consumer if entries else "?"
    return f"a batch of {len(entries)} commands (consumer {consumer!r})"
