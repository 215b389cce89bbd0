"""The transactional inbox: one commit per business command, in the caller's
own database transaction."""

from __future__ import annotations

import datetime as dt
import functools
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from sqlalchemy import Connection
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from inboxguard._core.clock import Clock, utc_now
from inboxguard._core.context import session_var
from inboxguard._core.extract import CommandIdSpec, command_id_getter, payload_of
from inboxguard._core.identity import validate_identity
from inboxguard._core.retention import RetentionPolicy
from inboxguard.errors import (
    ConfigurationError,
)
from inboxguard.inbox._decide import Decisions, Prepared, busy_error
from inboxguard.inbox._inspection import Inspection
from inboxguard.inbox._maintenance import Maintenance
from inboxguard.inbox._records import InboxEntry, QuarantineReason
from inboxguard.sql.dialects import Claim, ClaimSteps, Dialect
from inboxguard.sql.errors import is_busy
from inboxguard.sql.schema import inbox_tables

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

__all__ = ["Inbox", "Prepared"]

logger = logging.getLogger("inboxguard")
P = ParamSpec("P")
R = TypeVar("R")
_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}\Z")
#: Default bound on waiting for another transaction's claim.
DEFAULT_LOCK_TIMEOUT = dt.timedelta(seconds=5)


class Inbox(Decisions, Inspection, Maintenance):
    """Records each business command once, in the caller's transaction.

    The evidence row (consumer, command ID, payload digest) commits if and only
    if the caller's transaction commits, so a command's effects and the record
    that they happened cannot disagree.

    Args:
        engine: the database (PostgreSQL, MariaDB/MySQL or SQLite). Quarantine
            records are written through it in transactions of their own.
        retention: a :class:`RetentionPolicy`, or a ``timedelta`` meaning one
            window with no margin. Evidence is kept for its horizon.
        table_prefix: prefix of the inbox's tables.
        lock_timeout: how long a claim waits for another transaction holding
            the same command before :class:`InProgressError`; ``None`` waits
            as long as the database does.
        clock: zero-argument callable returning an aware datetime (default:
            UTC now); tests move time with it.

    Raises:
        ConfigurationError: an argument cannot keep the guarantees.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        retention: RetentionPolicy | dt.timedelta,
        table_prefix: str = "inboxguard_",
        lock_timeout: dt.timedelta | None = DEFAULT_LOCK_TIMEOUT,
        clock: Clock | None = None,
    ) -> None:
        if not isinstance(engine, Engine):
            msg = f"engine must be a sqlalchemy Engine, got {type(engine).__name__}"
            if hasattr(engine, "sync_engine"):
                msg += (
                    "; pass a sync Engine on the same database (it serves schema creation,"
                    " lookups and quarantine reads); guard_async() takes the AsyncSession"
                    " and writes through its own AsyncEngine"
                )
            raise ConfigurationError(msg)
        if not isinstance(table_prefix, str) or not _PREFIX.match(table_prefix):
            msg = f"table_prefix {table_prefix!r} must match [A-Za-z_][A-Za-z0-9_]{{0,39}}"
            raise ConfigurationError(msg)
        if lock_timeout is not None and (
            not isinstance(lock_timeout, dt.timedelta) or lock_timeout < dt.timedelta(0)
        ):
            msg = f"lock_timeout must be a non-negative timedelta or None, got {lock_timeout!r}"
            raise ConfigurationError(msg)
        if clock is not None and not callable(clock):
            msg = f"clock must be a zero-argument callable, got {clock!r}"
            raise ConfigurationError(msg)
        self.engine = engine
        self.retention = RetentionPolicy.coerce(retention)
        self.table_prefix = table_prefix
        self.lock_timeout = lock_timeout
        self.clock: Clock = clock or utc_now
        self.tables = inbox_tables(table_prefix)
        self._dialects: dict[str, Dialect] = {}

    def __repr__(self) -> str:
        """Show the database, prefix and retention."""
        return (
            f"<Inbox {self.engine.url.render_as_string()} {self.table_prefix!r} {self.retention}>"
        )

    # -- schema -------------------------------------------------------------------------

    def create_schema(self) -> None:
        """Create the inbox, quarantine and watermark tables if they do not exist
        (idempotent)."""
        self.tables.metadata.create_all(
            self.engine, tables=[self.tables.inbox, self.tables.quarantine, self.watermarks]
        )

    def drop_schema(self) -> None:
        """Drop the inbox, quarantine and watermark tables, with every record in them."""
        self.tables.metadata.drop_all(
            self.engine, tables=[self.tables.inbox, self.tables.quarantine, self.watermarks]
        )

    # -- retention ----------------------------------------------------------------------

    def require_alignment(self, source: str = "declared", **windows: dt.timedelta) -> None:
        """Fail unless every replay window fits inside the evidence horizon.

        Adapters call this at worker start with the windows they discover,
        naming where they found them in ``source``.

        Raises:
            RetentionMisalignedError: a window is longer than the horizon.
        """
        self.retention.check(source, **windows)

    # -- the guard ----------------------------------------------------------------------

    @contextmanager
    def guard(
        self,
        session: Session | Connection,
        *,
        consumer: str,
        command_id: str,
        payload: object,
        exclude: Iterable[str] = (),
        sent_at: dt.datetime | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> Iterator[InboxEntry]:
        """Claim ``command_id`` for ``consumer`` inside the caller's transaction.

        Yields an :class:`InboxEntry`. When ``entry.duplicate`` is false the
        block applies the command; the claim and the block's writes then commit
        or roll back together, with the caller's transaction, which the guard
        never commits or rolls back. ``sent_at`` (the message's own timestamp)
        refuses messages older than the evidence horizon; ``details`` (message
        arguments, headers) goes into any quarantine record.

        Raises:
            InvalidCommandError: ``consumer`` or ``command_id`` is unusable.
            PayloadEncodingError: the payload (or the assigned result) has no
                canonical encoding.
            PayloadMismatchError: the command was processed with another
                payload; quarantined, the block does not run.
            BeyondRetentionError: ``sent_at`` is older than the horizon;
                quarantined, the block does not run.
            InProgressError: another transaction holds the claim past
                ``lock_timeout``, or the database reported a conflict.
        """
        prepared = self.prepare(consumer, command_id, payload, exclude, sent_at, details)
        conn = _connection_of(session)
        dialect = self.dialect(conn)
        claim = _run_claim(conn, dialect.claim(prepared.params), prepared)
        entry = self.judge(prepared, claim)
        token = session_var.set(session)
        try:
            yield entry
        finally:
            session_var.reset(token)
        if entry._result_set and entry.result is not None:  # noqa: SLF001
            conn.execute(dialect.store_result_stmt, self.result_params(prepared, entry))

    def quarantine_delivery(
        self,
        *,
        consumer: str,
        command_id: str,
        payload: object,
        reason: QuarantineReason | str,
        exclude: Iterable[str] = (),
        details: Mapping[str, Any] | None = None,
    ) -> bool:
        """Refuse a delivery durably: write (or count again) its quarantine record.

        The record is written in a transaction of its own, so it survives the
        caller's rollback. Adapters call this when a command's retries are
        exhausted, before the broker dead-letters it. Returns False when the
        record could not be written (the whole record is logged at ERROR).

        Raises:
            InvalidCommandError: ``consumer`` or ``command_id`` is unusable.
            PayloadEncodingError: the payload has no canonical encoding.
        """
        prepared, _ = self.assess(consumer, command_id, payload, exclude, None, details)
        return self.quarantine(prepared, reason)

    async def quarantine_delivery_async(
        self,
        engine: AsyncEngine,
        *,
        consumer: str,
        command_id: str,
        payload: object,
        reason: QuarantineReason | str,
        exclude: Iterable[str] = (),
        details: Mapping[str, Any] | None = None,
    ) -> bool:
        """:meth:`quarantine_delivery` through an ``AsyncEngine`` on the same database."""
        from inboxguard.inbox import _aguard  # noqa: PLC0415 - keeps greenlet out of sync imports

        prepared, _ = self.assess(consumer, command_id, payload, exclude, None, details)
        return await _aguard.quarantine_async(self, engine, prepared, reason)

    def handler(
        self, *, consumer: str, command_id: CommandIdSpec, exclude: Iterable[str] = ()
    ) -> Callable[[Callable[..., R]], Callable[..., R]]:
        """Decorate ``fn(session, *args, **kwargs)`` so each command runs once.

        The wrapper guards the call with ``command_id`` (a callable over the
        arguments after ``session``, or the name of one) and the arguments as
        the payload. A fresh command runs ``fn`` and stores its return value;
        a duplicate returns the stored value (as decoded JSON) without
        running ``fn``.

        Raises:
            ConfigurationError: ``command_id`` names no argument of ``fn``.
        """
        validate_identity(consumer, "consumer")
        excluded = tuple(exclude)

        def decorate(fn: Callable[..., R]) -> Callable[..., R]:
            get_id = command_id_getter(command_id, fn, skip=1)

            @functools.wraps(fn)
            def wrapper(session: Session | Connection, *args: Any, **kwargs: Any) -> R:
                with self.guard(
                    session,
                    consumer=consumer,
                    command_id=get_id(args, kwargs),
                    payload=payload_of(args, kwargs),
                    exclude=excluded,
                ) as entry:
                    if entry.duplicate:
                        return entry.result  # type: ignore[no-any-return]
                    entry.result = fn(session, *args, **kwargs)
                    return entry.result  # type: ignore[no-any-return]

            return wrapper

        return decorate

    def guard_async(
        self,
        session: AsyncSession | AsyncConnection,
        *,
        consumer: str,
        command_id: str,
        payload: object,
        exclude: Iterable[str] = (),
        sent_at: dt.datetime | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> AbstractAsyncContextManager[InboxEntry]:
        """:meth:`guard` for asyncio, used as ``async with``.

        Takes a SQLAlchemy ``AsyncSession`` or ``AsyncConnection`` (asyncpg,
        aiosqlite, ...) and keeps the same contract and the same decisions;
        quarantine records are written on another connection of the session's
        own ``AsyncEngine``. :func:`inboxguard.current_session` returns the
        ``AsyncSession`` inside the block.
        """
        from inboxguard.inbox import _aguard  # noqa: PLC0415 - keeps greenlet out of sync imports

        return _aguard.guard_async(
            self,
            session,
            consumer=consumer,
            command_id=command_id,
            payload=payload,
            exclude=exclude,
            sent_at=sent_at,
            details=details,
        )

    def handler_async(
        self, *, consumer: str, command_id: CommandIdSpec, exclude: Iterable[str] = ()
    ) -> Callable[[Callable[..., Awaitable[R]]], Callable[..., Awaitable[R]]]:
        """:meth:`handler` for ``async def fn(session, *args, **kwargs)`` (an AsyncSession)."""
        from inboxguard.inbox import _aguard  # noqa: PLC0415 - keeps greenlet out of sync imports

        return _aguard.handler_async(
            self, consumer=consumer, command_id=command_id, exclude=exclude
        )


def _connection_of(session: Session | Connection) -> Connection:
    if isinstance(session, Session):
        conn = session.connection()
    elif isinstance(session, Connection):
        conn = session
    else:
        msg = (
            f"guard() needs a sqlalchemy Session or Connection, got {type(session).__name__};"
            " for an AsyncSession use guard_async()"
        )
        raise ConfigurationError(msg)
    if conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
        msg = (
            "the connection runs in AUTOCOMMIT mode, so the inbox row could commit"
            " without the handler's changes; use a transactional connection"
        )
        raise ConfigurationError(msg)
    return conn


def _run_claim(conn: Connection, steps: ClaimSteps, prepared: Prepared) -> Claim:
    try:
        step = next(steps)
        while True:
            step = steps.send(conn.execute(*step))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    except DBAPIError as error:
        if is_busy(error):
            raise busy_error(prepared) from error
        raise
