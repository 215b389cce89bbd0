"""The transactional inbox: one commit per business command, in the caller's
own database transaction."""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from sqlalchemy import Connection, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from inboxguard import _quarantine
from inboxguard._clock import Clock, checked_now, utc_now
from inboxguard._command import validate_identity
from inboxguard._context import session_var
from inboxguard._dberrors import is_busy
from inboxguard._digest import canonical_json, digest_of
from inboxguard._extract import CommandIdSpec, command_id_getter, payload_of
from inboxguard._maintenance import Maintenance
from inboxguard._records import InboxEntry, InboxRecord, QuarantineReason, QuarantineRecord
from inboxguard._schema import inbox_tables
from inboxguard.dialects import Claim, ClaimSteps, Dialect, dialect_for
from inboxguard.errors import (
    BeyondRetentionError,
    ConfigurationError,
    InProgressError,
    PayloadMismatchError,
)
from inboxguard.retention import RetentionPolicy, format_duration

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

__all__ = ["Inbox", "Prepared"]

logger = logging.getLogger("inboxguard")
P = ParamSpec("P")
R = TypeVar("R")
_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}\Z")
#: Default bound on waiting for another transaction's claim.
DEFAULT_LOCK_TIMEOUT = dt.timedelta(seconds=5)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A validated delivery: identity, digest and the claim's parameters."""

    consumer: str
    command_id: str
    digest: str
    now: dt.datetime
    params: dict[str, Any]
    details: Mapping[str, Any] | None


class Inbox(Maintenance):
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
        from inboxguard import _aguard  # noqa: PLC0415 - keeps greenlet out of sync imports

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
        from inboxguard import _aguard  # noqa: PLC0415 - keeps greenlet out of sync imports

        return _aguard.handler_async(
            self, consumer=consumer, command_id=command_id, exclude=exclude
        )

    # -- the decision, shared by the sync and async guards -------------------------------

    def prepare(
        self,
        consumer: str,
        command_id: str,
        payload: object,
        exclude: Iterable[str] = (),
        sent_at: dt.datetime | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> Prepared:
        """Validate a delivery and compute its digest and claim parameters.

        Writes nothing. Raises as :meth:`guard` does, except that a stale
        ``sent_at`` is quarantined here (in its own transaction) and raised.
        """
        prepared, stale = self.assess(consumer, command_id, payload, exclude, sent_at, details)
        if stale is not None:
            self.quarantine(prepared, QuarantineReason.BEYOND_RETENTION)
            raise stale
        return prepared

    def assess(
        self,
        consumer: str,
        command_id: str,
        payload: object,
        exclude: Iterable[str] = (),
        sent_at: dt.datetime | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> tuple[Prepared, BeyondRetentionError | None]:
        """Like :meth:`prepare`, but return the stale verdict instead of acting on it.

        Performs no I/O at all: a caller with its own driver (the async guard)
        quarantines and raises the returned :class:`BeyondRetentionError` itself.
        """
        validate_identity(consumer, "consumer")
        validate_identity(command_id, "command_id")
        digest = digest_of(payload, exclude=exclude)
        now = checked_now(self.clock)
        ttl = self.retention.result_ttl
        params = {
            "consumer": consumer,
            "command_id": command_id,
            "key_consumer": consumer,
            "key_command_id": command_id,
            "digest": digest,
            "processed_at": now,
            "expires_at": now + self.retention.horizon,
            "result_expires_at": now + ttl if ttl is not None else None,
        }
        prepared = Prepared(consumer, command_id, digest, now, params, details)
        stale = self._stale_error(prepared, sent_at) if sent_at is not None else None
        return prepared, stale

    def judge(self, prepared: Prepared, claim: Claim) -> InboxEntry:
        """Turn a claim into an entry, or quarantine and raise on a mismatch."""
        found = self.verdict(prepared, claim)
        if isinstance(found, PayloadMismatchError):
            self.quarantine(
                prepared, QuarantineReason.PAYLOAD_MISMATCH, stored_digest=found.stored_digest
            )
            raise found
        return found

    def verdict(self, prepared: Prepared, claim: Claim) -> InboxEntry | PayloadMismatchError:
        """Like :meth:`judge`, but return a mismatch (logged) instead of acting on it."""
        if claim.fresh:
            return InboxEntry(
                consumer=prepared.consumer,
                command_id=prepared.command_id,
                digest=prepared.digest,
                duplicate=False,
            )
        if claim.stored_digest != prepared.digest:
            return self._mismatch(prepared, claim.stored_digest)
        # Past result_ttl the result counts as dropped even before purge has
        # compacted the row, so what a duplicate sees never depends on purge timing.
        expired = claim.result_expires_at is not None and claim.result_expires_at <= prepared.now
        kept = None if expired else claim.result_json
        return InboxEntry(
            consumer=prepared.consumer,
            command_id=prepared.command_id,
            digest=prepared.digest,
            duplicate=True,
            result=json.loads(kept) if kept is not None else None,
            result_expired=expired,
        )

    def result_params(self, prepared: Prepared, entry: InboxEntry) -> dict[str, Any]:
        """Parameters of the statement that stores a fresh command's result."""
        return {
            "key_consumer": prepared.consumer,
            "key_command_id": prepared.command_id,
            "new_result": canonical_json(entry.result, root="result"),
        }

    def dialect(self, conn: Connection) -> Dialect:
        """The (cached) inbox dialect for a connection's database."""
        name = conn.dialect.name
        found = self._dialects.get(name)
        if found is None:
            found = self._dialects[name] = dialect_for(conn.dialect, self.tables, self.lock_timeout)
        return found

    def _stale_error(self, prepared: Prepared, sent_at: dt.datetime) -> BeyondRetentionError | None:
        if not isinstance(sent_at, dt.datetime) or sent_at.utcoffset() is None:
            msg = f"sent_at must be a timezone-aware datetime, got {sent_at!r}"
            raise ConfigurationError(msg)
        limit = prepared.now - self.retention.max_message_age
        if sent_at >= limit:
            return None
        msg = (
            f"command {prepared.command_id!r} of consumer {prepared.consumer!r} was sent at"
            f" {sent_at.isoformat()}, more than {format_duration(self.retention.max_message_age)}"
            " ago: its evidence may be purged, so it was refused and quarantined; replay it"
            " deliberately once checked, or lengthen the RetentionPolicy"
        )
        return BeyondRetentionError(
            msg,
            consumer=prepared.consumer,
            command_id=prepared.command_id,
            sent_at=sent_at,
            limit=limit,
        )

    def _mismatch(self, prepared: Prepared, stored: str) -> PayloadMismatchError:
        logger.warning(
            "payload mismatch: consumer=%s command_id=%s stored_digest=%s incoming_digest=%s;"
            " message quarantined",
            prepared.consumer,
            prepared.command_id,
            stored,
            prepared.digest,
            extra={
                "consumer": prepared.consumer,
                "command_id": prepared.command_id,
                "stored_digest": stored,
                "incoming_digest": prepared.digest,
            },
        )
        return PayloadMismatchError(
            consumer=prepared.consumer,
            command_id=prepared.command_id,
            stored_digest=stored,
            incoming_digest=prepared.digest,
        )

    # -- quarantine and inspection -------------------------------------------------------

    def quarantine(
        self, prepared: Prepared, reason: str, *, stored_digest: str | None = None
    ) -> bool:
        """Write (or count again) a quarantine record in its own transaction.

        Returns False if the record could not be written; the failure is
        logged with the whole record, and the refusal stands regardless.
        """
        values = self.quarantine_values(prepared, reason, stored_digest=stored_digest)
        with self.engine.connect() as probe:
            stmt = self.dialect(probe).upsert_quarantine()
        return _quarantine.write_quarantine(self.engine, stmt, values)

    def quarantine_values(
        self, prepared: Prepared, reason: str, *, stored_digest: str | None = None
    ) -> dict[str, Any]:
        """Parameters of the dialect's ``upsert_quarantine()`` statement for a delivery."""
        return _quarantine.quarantine_values(
            consumer=prepared.consumer,
            command_id=prepared.command_id,
            reason=str(reason),
            incoming_digest=prepared.digest,
            stored_digest=stored_digest,
            now=prepared.now,
            details=prepared.details,
        )

    def quarantined(
        self, consumer: str | None = None, *, status: str | None = "open"
    ) -> list[QuarantineRecord]:
        """Return quarantine records (open ones by default), oldest first."""
        return _quarantine.read_quarantine(self.engine, self.tables, consumer, status)

    def resolve_quarantine(self, record_id: int) -> bool:
        """Mark an open quarantine record resolved; False if none is open with that id."""
        return _quarantine.resolve_quarantine(self.engine, self.tables, record_id)

    def lookup(self, consumer: str, command_id: str) -> InboxRecord | None:
        """Return the committed evidence of a command, or None."""
        inbox = self.tables.inbox
        stmt = select(inbox).where(inbox.c.consumer == consumer, inbox.c.command_id == command_id)
        with self.engine.connect() as conn:
            row = conn.execute(stmt).mappings().first()
        if row is None:
            return None
        result = json.loads(row["result"]) if row["result"] is not None else None
        return InboxRecord(**{**row, "result": result})


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


def busy_error(prepared: Prepared) -> InProgressError:
    """The error for a claim that met a lock timeout, deadlock or serialization
    failure."""
    msg = (
        f"command {prepared.command_id!r} of consumer {prepared.consumer!r} is being"
        " processed by another transaction (or the database reported a conflict);"
        " roll back and deliver it again later"
    )
    return InProgressError(msg, consumer=prepared.consumer, command_id=prepared.command_id)
