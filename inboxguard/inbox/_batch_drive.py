"""The two drivers of :mod:`._batch_flow`: sync and asyncio, side by side.

They perform the batch flow's requests exactly as :mod:`._drive` performs
the single guard's (the caller's connection for statements, a connection of
its own for each quarantine record, in the caller's tenant schema), and run
the caller's block with the :class:`~._batch.InboxBatch`, with
:func:`inboxguard.current_session` bound.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, closing, contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

from sqlalchemy import Connection
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from inboxguard._core.context import session_var
from inboxguard.inbox._batch import InboxBatch
from inboxguard.inbox._batch_flow import BatchFlow, BatchHandOver, BatchRequest
from inboxguard.inbox._drive import quarantine_async, quarantine_sync
from inboxguard.inbox._flow import BlockExit, Connect, Execute, WriteQuarantine
from inboxguard.sql.connection import (
    async_connection_of,
    connection_of,
    transaction_kept,
    transaction_mark,
)
from inboxguard.sql.direct import execute, execute_async
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


def _resume(flow: BatchFlow, reply: Any = None, error: DBAPIError | None = None) -> Any:
    """Send the reply (or throw the error) into the flow; None once it is done."""
    try:
        return flow.send(reply) if error is None else flow.throw(error)
    except StopIteration:
        return None


def _unexpected(request: BatchRequest | None) -> NoReturn:
    msg = f"the batch flow asked for {request!r} out of order"
    raise RuntimeError(msg)


@contextmanager
def drive_batch_sync(
    flow: BatchFlow, session: Session | Connection, engine: Engine
) -> Iterator[InboxBatch]:
    """Run a batch flow on the caller's ``Session`` or ``Connection``;
    quarantine records go through ``engine``."""
    with closing(flow):
        if not isinstance(_resume(flow), Connect):
            _unexpected(None)
        conn = connection_of(session, wrong_type=_SYNC_ONLY, row=_ROWS)
        request = _resume(flow, conn.dialect)
        while request is not None:
            match request:
                case BatchHandOver(batch):
                    mark = transaction_mark(conn)
                    token = session_var.set(session)
                    try:
                        yield batch
                    except Exception as error:
                        _resume(flow, BlockExit(transaction_kept(mark), error))
                        raise
                    finally:
                        session_var.reset(token)
                    request = _resume(flow, BlockExit(transaction_kept(mark)))
                case Execute(statement, params):
                    try:
                        result = execute(conn, statement, params)
                    except DBAPIError as error:
                        request = _resume(flow, error=error)
                    else:
                        request = _resume(flow, result)
                case WriteQuarantine():
                    tenant = engine.execution_options(**schema_options(conn))
                    request = _resume(flow, quarantine_sync(request, tenant))
                case _:
                    _unexpected(request)


@asynccontextmanager
async def drive_batch_async(
    flow: BatchFlow, session: AsyncSession | AsyncConnection
) -> AsyncIterator[InboxBatch]:
    """Run a batch flow on the caller's ``AsyncSession`` or ``AsyncConnection``;
    quarantine records go through the session's own ``AsyncEngine``."""
    with closing(flow):
        if not isinstance(_resume(flow), Connect):
            _unexpected(None)
        conn = await async_connection_of(session, wrong_type=_ASYNC_ONLY, row=_ROWS)
        request = _resume(flow, conn.dialect)
        sync_conn: Connection = conn.sync_connection  # type: ignore[assignment]  # started
        while request is not None:
            match request:
                case BatchHandOver(batch):
                    mark = transaction_mark(sync_conn)
                    token = session_var.set(session)
                    try:
                        yield batch
                    except Exception as error:
                        _resume(flow, BlockExit(transaction_kept(mark), error))
                        raise
                    finally:
                        session_var.reset(token)
                    request = _resume(flow, BlockExit(transaction_kept(mark)))
                case Execute(statement, params):
                    try:
                        result = await execute_async(conn, statement, params)
                    except DBAPIError as error:
                        request = _resume(flow, error=error)
                    else:
                        request = _resume(flow, result)
                case WriteQuarantine():
                    tenant = conn.engine.execution_options(**schema_options(sync_conn))
                    request = _resume(flow, await quarantine_async(request, tenant))
                case _:
                    _unexpected(request)
