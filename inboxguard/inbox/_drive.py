"""The two drivers of :mod:`._flow`: sync and asyncio, side by side.

Each does only what its kind of I/O needs: check the caller's session, run a
statement on its connection, write a quarantine record in a transaction of
its own, and run the caller's block with the entry (with
:func:`inboxguard.current_session` bound), reporting how the block ended and
whether the caller's transaction is still the one the claim was made in.
Every decision, and its order, is the flow's. A database error raised while
performing a request is thrown back into the flow, which decides what it
means. Around the claim and the block each driver holds the guard's
savepoint on the caller's connection (:mod:`inboxguard.sql.savepoint`, the
batch's drivers' too): rolled back when the block or the flow ends in an
error or a cancellation, released after a normal end.

A quarantine record is never written on the caller's connection: when the
engine's pool would hand out the caller's own connection, or has none free,
the record is logged at ERROR instead, without waiting.

The asyncio driver loads ``sqlalchemy.ext.asyncio`` only when it runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import (
    AbstractContextManager,
    asynccontextmanager,
    closing,
    nullcontext,
)
from types import TracebackType
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Executable
from sqlalchemy.engine import Dialect as SaDialect
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from inboxguard._core.context import entry_var, session_var
from inboxguard._telemetry import OUTCOME, Telemetry
from inboxguard.inbox._decide import results_vanished_error
from inboxguard.inbox._flow import (
    BlockExit,
    Connect,
    Execute,
    GuardFlow,
    HandOver,
    Request,
    WriteQuarantine,
    resume,
    unexpected,
)
from inboxguard.inbox._quarantine import log_not_written, log_write_failure
from inboxguard.sql.connection import (
    async_connection_of,
    connection_of,
    spare_connection_problem,
)
from inboxguard.sql.direct import Rows, execute, execute_async
from inboxguard.sql.savepoint import GuardSavepoint
from inboxguard.sql.table_text import schema_options

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

    from inboxguard.inbox._records import InboxEntry

__all__ = ["drive_async", "drive_sync", "handler_span", "quarantine_async", "quarantine_sync"]

_ROW = "the inbox row could commit without the handler's changes"
_SYNC_ONLY = (
    "guard() needs a sqlalchemy Session or Connection, got {type};"
    " for an AsyncSession use guard_async()"
)
_ASYNC_ONLY = (
    "guard_async() needs a sqlalchemy AsyncSession or AsyncConnection, got {type};"
    " for a sync Session or Connection use guard()"
)


def _expect_connect(request: Request | None) -> None:
    """The flow's first request is always :class:`Connect`."""
    if not isinstance(request, Connect):
        unexpected(request)


def _label(entry: InboxEntry) -> str:
    return f"command {entry.command_id!r} (consumer {entry.consumer!r})"


def handler_span(telemetry: Telemetry, entry: InboxEntry) -> AbstractContextManager[None]:
    """The span around the caller's block (the handler, or the skip of a duplicate)."""
    if not telemetry.enabled:
        return nullcontext()
    outcome = "duplicate" if entry.duplicate else "fresh"
    return telemetry.span(
        "inboxguard.handler", entry.consumer, entry.command_id, **{OUTCOME: outcome}
    )


# -- sync ------------------------------------------------------------------------------


class drive_sync(AbstractContextManager["InboxEntry"]):  # noqa: N801 (used as a function)
    """Run a guard flow on the caller's ``Session`` or ``Connection``; quarantine
    records go through ``engine``; the caller's block runs in the
    ``inboxguard.handler`` span.

    A context manager class rather than a generator: every guarded message
    enters it, and one generator (the flow's) is all the hot path needs.
    """

    __slots__ = (
        "_conn",
        "_engine",
        "_flow",
        "_savepoint",
        "_session",
        "_span",
        "_telemetry",
        "_token",
    )

    def __init__(
        self, flow: GuardFlow, session: Session | Connection, engine: Engine, telemetry: Telemetry
    ) -> None:
        self._flow = flow
        self._session = session
        self._engine = engine
        self._telemetry = telemetry

    def __enter__(self) -> InboxEntry:
        flow = self._flow
        try:
            _expect_connect(resume(flow))
            conn = self._conn = connection_of(self._session, wrong_type=_SYNC_ONLY, row=_ROW)
            savepoint = self._savepoint = GuardSavepoint(GuardSavepoint.orm(self._session), conn)
        except BaseException:
            flow.close()
            raise
        try:
            entry = self._perform(resume(flow, conn.dialect))
            if entry is None:  # the flow ended without handing over: it never does
                unexpected(None)
            savepoint.enter_block(_label(entry))
            span = self._span = handler_span(self._telemetry, entry)
            self._token = session_var.set(self._session)
            entry_var.set(entry)  # kept after the block: see current_entry()
            try:
                span.__enter__()
            except BaseException:
                session_var.reset(self._token)
                raise
        except BaseException:
            try:
                savepoint.abandon()  # the block never ran: the claim's transaction is kept
            finally:
                flow.close()
            raise
        return entry

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        flow, savepoint = self._flow, self._savepoint
        try:
            self._span.__exit__(kind, error, traceback)
            kept = savepoint.exit_block()
            if error is None:
                session_var.reset(self._token)
                try:
                    self._perform(resume(flow, BlockExit(kept)))
                except BaseException:
                    savepoint.abandon()
                    raise
                savepoint.release()
            elif isinstance(error, Exception):
                try:
                    resume(flow, BlockExit(kept, error))
                finally:
                    session_var.reset(self._token)
                    savepoint.abandon()
            else:  # KeyboardInterrupt, SystemExit, GeneratorExit: undo, then clean up
                session_var.reset(self._token)
                savepoint.abandon()
        finally:
            flow.close()

    def _perform(self, request: Request | None) -> InboxEntry | None:
        """Perform the flow's requests until it hands the entry over (returned)
        or ends (None)."""
        flow = self._flow
        while request is not None:
            match request:
                case Execute(statement, params):
                    if self._kept_for_commit(statement, params):
                        request = resume(flow, KEPT)  # the server checks its one row
                        continue
                    try:
                        result = execute(self._conn, statement, params)
                    except DBAPIError as error:
                        request = resume(flow, error=error)
                    else:
                        request = resume(flow, result)
                case HandOver(entry):
                    return entry
                case WriteQuarantine():
                    # The record goes to the caller's schema (schema_translate_map).
                    tenant = self._engine.execution_options(**schema_options(self._conn))
                    request = resume(flow, quarantine_sync(request, tenant))
                case _:
                    unexpected(request)
        return None

    def _kept_for_commit(self, statement: Executable, params: Mapping[str, Any]) -> bool:
        """Whether the result store is kept back for the ``COMMIT`` (see
        :meth:`GuardSavepoint.keep_for_commit`); only a statement with an
        ``at_commit`` variant, after the block, can be."""
        checked = getattr(statement, "at_commit", None)
        if checked is None:
            return False
        consumer, command_id = params["key_consumer"], params["key_command_id"]
        return self._savepoint.keep_for_commit(
            statement,
            checked,
            params,
            lambda matched: results_vanished_error(consumer, [command_id], matched),
        )


#: What the flow reads of a result store kept back for the COMMIT: one row.
KEPT = Rows([(1,)], 1)


def quarantine_sync(request: WriteQuarantine, engine: Engine) -> bool:
    """Write a quarantine record through ``engine``, in a transaction of its own
    on a connection other than the caller's; False (the record logged at
    ERROR) when no such connection is free or the write failed."""
    upsert = _upsert_of(request)
    problem = spare_connection_problem(engine.pool)
    if problem is not None:
        log_not_written(request.values, problem)
        return False
    try:
        with engine.begin() as conn:
            conn.execute(upsert(conn.dialect), request.values)
    except Exception:
        log_write_failure(request.values)
        return False
    return True


# -- asyncio ---------------------------------------------------------------------------


@asynccontextmanager
async def drive_async(
    flow: GuardFlow, session: AsyncSession | AsyncConnection, telemetry: Telemetry
) -> AsyncIterator[InboxEntry]:
    """Run a guard flow on the caller's ``AsyncSession`` or ``AsyncConnection``;
    quarantine records go through the session's own ``AsyncEngine``."""
    with closing(flow):
        _expect_connect(resume(flow))
        conn = await async_connection_of(session, wrong_type=_ASYNC_ONLY, row=_ROW)
        sync_session: Session | None = getattr(session, "sync_session", None)
        savepoint = await conn.run_sync(lambda sync: GuardSavepoint(sync_session, sync))
        try:
            request = resume(flow, conn.dialect)
            while request is not None:
                match request:
                    case HandOver(entry):
                        await savepoint.enter_block_async(conn, _label(entry))
                        token = session_var.set(session)
                        entry_var.set(entry)  # kept after the block: see current_entry()
                        try:
                            with handler_span(telemetry, entry):
                                yield entry
                        except BaseException as error:  # cancellation too
                            kept = savepoint.exit_block()
                            if isinstance(error, Exception):
                                resume(flow, BlockExit(kept, error))
                            raise
                        finally:
                            session_var.reset(token)
                        request = resume(flow, BlockExit(savepoint.exit_block()))
                    case Execute(statement, params):
                        try:
                            result = await execute_async(conn, statement, params)
                        except DBAPIError as error:
                            request = resume(flow, error=error)
                        else:
                            request = resume(flow, result)
                    case WriteQuarantine():
                        # The record goes to the caller's schema (schema_translate_map).
                        options = schema_options(conn.sync_connection)  # type: ignore[arg-type]
                        tenant = conn.engine.execution_options(**options)
                        request = resume(flow, await quarantine_async(request, tenant))
                    case _:
                        unexpected(request)
        except BaseException:
            await savepoint.abandon_async(conn)
            raise
        await savepoint.release_async(conn)


async def quarantine_async(request: WriteQuarantine, engine: AsyncEngine) -> bool:
    """Write a quarantine record on a connection of its own, without blocking the
    loop; False (the record logged at ERROR) as :func:`quarantine_sync`."""
    upsert = _upsert_of(request)
    problem = spare_connection_problem(engine.sync_engine.pool)
    if problem is not None:
        log_not_written(request.values, problem)
        return False
    try:
        async with engine.begin() as conn:
            await conn.execute(upsert(conn.dialect), request.values)
    except Exception:
        log_write_failure(request.values)
        return False
    return True


def _upsert_of(request: WriteQuarantine) -> Callable[[SaDialect], Executable]:
    """The upsert a SQL store's quarantine request carries."""
    if request.statement is None:
        unexpected(request)
    return request.statement
