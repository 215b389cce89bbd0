"""The inbox guard for asyncio: SQLAlchemy ``AsyncSession`` / ``AsyncConnection``.

Every decision is the sync guard's own: :meth:`Inbox.assess` validates and
judges staleness, the dialect's sans-I/O claim generator is driven here with
``await``, and :meth:`Inbox.verdict` decides fresh / duplicate / mismatch.
Only the I/O differs: statements run on the caller's ``AsyncConnection``, and
quarantine records are written on a separate connection of the same
``AsyncEngine``, in a transaction of their own, without blocking the loop.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Executable
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from inboxguard._core.context import session_var
from inboxguard._core.extract import CommandIdSpec, command_id_getter, payload_of
from inboxguard._core.identity import validate_identity
from inboxguard.errors import ConfigurationError, PayloadMismatchError
from inboxguard.inbox import _quarantine
from inboxguard.inbox._decide import busy_error
from inboxguard.inbox._records import InboxEntry, QuarantineReason
from inboxguard.sql.dialects import Claim, ClaimSteps
from inboxguard.sql.errors import is_busy

if TYPE_CHECKING:
    import datetime as dt

    from inboxguard.inbox import Inbox
    from inboxguard.inbox._decide import Prepared

__all__ = ["guard_async", "handler_async", "quarantine_async"]

R = TypeVar("R")
AsyncSessionLike = AsyncSession | AsyncConnection


@asynccontextmanager
async def guard_async(
    inbox: Inbox,
    session: AsyncSessionLike,
    *,
    consumer: str,
    command_id: str,
    payload: object,
    exclude: Iterable[str] = (),
    sent_at: dt.datetime | None = None,
    details: Mapping[str, Any] | None = None,
) -> AsyncIterator[InboxEntry]:
    """The body of :meth:`Inbox.guard_async` (same contract as :meth:`Inbox.guard`)."""
    prepared, stale = inbox.assess(consumer, command_id, payload, exclude, sent_at, details)
    conn = await _connection_of(session)
    if stale is not None:
        await quarantine_async(inbox, conn.engine, prepared, QuarantineReason.BEYOND_RETENTION)
        raise stale
    dialect = inbox.dialect(conn.sync_connection)  # type: ignore[arg-type]
    try:
        claim = await _run_claim(conn, dialect.claim(prepared.params))
    except DBAPIError as error:
        if is_busy(error):
            raise busy_error(prepared) from error
        raise
    found = inbox.verdict(prepared, claim)
    if isinstance(found, PayloadMismatchError):
        await quarantine_async(
            inbox,
            conn.engine,
            prepared,
            QuarantineReason.PAYLOAD_MISMATCH,
            stored_digest=found.stored_digest,
        )
        raise found
    token = session_var.set(session)
    try:
        yield found
    finally:
        session_var.reset(token)
    if found._result_set and found.result is not None:  # noqa: SLF001
        await conn.execute(dialect.store_result_stmt, inbox.result_params(prepared, found))


async def quarantine_async(
    inbox: Inbox,
    engine: AsyncEngine,
    prepared: Prepared,
    reason: str,
    *,
    stored_digest: str | None = None,
) -> bool:
    """Write (or count again) a quarantine record on a connection of its own.

    The async twin of :meth:`Inbox.quarantine`: same values, same statement,
    same logging on failure (returns False; the refusal stands regardless).
    """
    values = inbox.quarantine_values(prepared, reason, stored_digest=stored_digest)
    try:
        async with engine.begin() as conn:
            stmt: Executable = inbox.dialect(conn.sync_connection).upsert_quarantine()  # type: ignore[arg-type]
            await conn.execute(stmt, values)
    except Exception:
        _quarantine.log_write_failure(values)
        return False
    return True


def handler_async(
    inbox: Inbox, *, consumer: str, command_id: CommandIdSpec, exclude: Iterable[str] = ()
) -> Callable[[Callable[..., Awaitable[R]]], Callable[..., Awaitable[R]]]:
    """The body of :meth:`Inbox.handler_async` (same contract as :meth:`Inbox.handler`)."""
    validate_identity(consumer, "consumer")
    excluded = tuple(exclude)

    def decorate(fn: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
        get_id = command_id_getter(command_id, fn, skip=1)

        @functools.wraps(fn)
        async def wrapper(session: AsyncSessionLike, *args: Any, **kwargs: Any) -> R:
            async with guard_async(
                inbox,
                session,
                consumer=consumer,
                command_id=get_id(args, kwargs),
                payload=payload_of(args, kwargs),
                exclude=excluded,
            ) as entry:
                if entry.duplicate:
                    return entry.result  # type: ignore[no-any-return]
                entry.result = await fn(session, *args, **kwargs)
                return entry.result  # type: ignore[no-any-return]

        return wrapper

    return decorate


async def _connection_of(session: AsyncSessionLike) -> AsyncConnection:
    if isinstance(session, AsyncSession):
        conn = await session.connection()
    elif isinstance(session, AsyncConnection):
        conn = session
    else:
        msg = (
            f"guard_async() needs a sqlalchemy AsyncSession or AsyncConnection, got"
            f" {type(session).__name__}; for a sync Session or Connection use guard()"
        )
        raise ConfigurationError(msg)
    if conn.sync_connection is None:
        conn = await conn.start()
    if conn.sync_connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT":  # type: ignore[union-attr]
        msg = (
            "the connection runs in AUTOCOMMIT mode, so the inbox row could commit"
            " without the handler's changes; use a transactional connection"
        )
        raise ConfigurationError(msg)
    return conn


async def _run_claim(conn: AsyncConnection, steps: ClaimSteps) -> Claim:
    try:
        step = next(steps)
        while True:
            step = steps.send(await conn.execute(*step))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
