"""The two drivers of :mod:`._batch_flow`: sync and asyncio, side by side.

They perform the batch flow's requests exactly as :mod:`._drive` performs
the single guard's (the caller's connection for statements, a connection of
its own for each quarantine record, in the caller's tenant schema), and run
the caller's block with the :class:`~._batch.InboxBatch`, with
:func:`inboxguard.current_session` bound.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
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
from inboxguard.sql.boundary import Boundary, NoBoundary, open_boundary
from inboxguard.sql.connection import (
    async_connection_of,
    connection_of,
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
        # Opened before the first statement on the caller's connection: a batch
        # that claims nothing (empty, or every entry refused) runs none.
        boundary: Boundary | NoBoundary = Boundary.none()
        kept = True
        try:
            request = _resume(flow, conn.dialect)
            while request is not None:
                match request:
                    case BatchHandOver(batch):
                        boundary.open_late()
                        mark = transaction_mark(conn)
                        boundary.watch(_label(batch))
                        token = session_var.set(session)
                        try:
                            yield batch
                        except BaseException as error:
                            kept = boundary.kept(mark)
                            boundary.unwatch()
                            if isinstance(error, Exception):
                                _resume(flow, BlockExit(kept, error))
                            raise
                        finally:
                            session_var.reset(token)
                        kept = boundary.kept(mark)
                        boundary.unwatch()
                        request = _resume(flow, BlockExit(kept))
                    case Execute(statement, params):
                        if boundary.absent:
                            boundary = open_boundary(_orm(session), conn)
                        request = _execute_sync(flow, conn, statement, params)
                    case WriteQuarantine():
                        tenant = engine.execution_options(**schema_options(conn))
                        request = _resume(flow, quarantine_sync(request, tenant))
                    case _:
                        _unexpected(request)
        except BaseException:
            boundary.abandon(kept)
            raise
        boundary.release()


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
        sync_conn: Connection = conn.sync_connection  # type: ignore[assignment]  # started
        sync_session: Session | None = getattr(session, "sync_session", None)
        boundary: Boundary | NoBoundary = (
            Boundary.none()
        )  # opened before the first statement, as drive_batch_sync
        kept = True
        try:
            request = _resume(flow, conn.dialect)
            while request is not None:
                match request:
                    case BatchHandOver(batch):
                        await conn.run_sync(_open_late(boundary))
                        mark = transaction_mark(sync_conn)
                        boundary.watch(_label(batch))
                        token = session_var.set(session)
                        try:
                            yield batch
                        except BaseException as error:  # cancellation too
                            kept = boundary.kept(mark)
                            boundary.unwatch()
                            if isinstance(error, Exception):
                                _resume(flow, BlockExit(kept, error))
                            raise
                        finally:
                            session_var.reset(token)
                        kept = boundary.kept(mark)
                        boundary.unwatch()
                        request = _resume(flow, BlockExit(kept))
                    case Execute(statement, params):
                        if boundary.absent:
                            boundary = await conn.run_sync(
                                lambda sync: open_boundary(sync_session, sync)
                            )
                        request = await _execute_async(flow, conn, statement, params)
                    case WriteQuarantine():
                        tenant = conn.engine.execution_options(**schema_options(sync_conn))
                        request = _resume(flow, await quarantine_async(request, tenant))
                    case _:
                        _unexpected(request)
        except BaseException:
            await conn.run_sync(lambda _: boundary.abandon(kept))
            raise
        await conn.run_sync(lambda _: boundary.release())


def _execute_sync(flow: BatchFlow, conn: Connection, statement: Any, params: Any) -> Any:
    """Run one statement; its result (or its database error) goes into the flow."""
    try:
        result = execute(conn, statement, params)
    except DBAPIError as error:
        return _resume(flow, error=error)
    return _resume(flow, result)


async def _execute_async(
    flow: BatchFlow, conn: AsyncConnection, statement: Any, params: Any
) -> Any:
    """:func:`_execute_sync` on an ``AsyncConnection``."""
    try:
        result = await execute_async(conn, statement, params)
    except DBAPIError as error:
        return _resume(flow, error=error)
    return _resume(flow, result)


def _open_late(boundary: Boundary | NoBoundary) -> Callable[[Any], None]:
    return lambda _: boundary.open_late()


def _orm(session: Session | Connection) -> Session | None:
    return session if isinstance(session, Session) else None


def _label(batch: InboxBatch) -> str:
    entries = list(batch)
    consumer = entries[0].consumer if entries else "?"
    return f"a batch of {len(entries)} commands (consumer {consumer!r})"
