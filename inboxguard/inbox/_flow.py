"""The whole guard as one sans-I/O flow.

:meth:`GuardFlows.guard` is a generator that makes every decision of a guarded
delivery, in one order, and asks for each piece of I/O by yielding a request:

1. validate the delivery and compute its digest (no I/O; bad input raises);
2. :class:`Connect`: the driver checks the caller's session and replies with
   its database's SQLAlchemy dialect. A configuration error (a wrong object,
   AUTOCOMMIT, a session over two engines) is raised here, before any
   refusal, by both drivers, which then open the savepoint the claim and the
   block run in (:mod:`inboxguard.sql.boundary`);
3. a ``sent_at`` older than the horizon: :class:`WriteQuarantine` (a
   transaction of its own), then :class:`~inboxguard.BeyondRetentionError`;
4. the claim: one :class:`Execute` per statement of the dialect's claim, on
   the caller's connection; a lock timeout, deadlock or serialization failure
   the driver throws back in becomes :class:`~inboxguard.InProgressError`;
5. the verdict: a mismatch is quarantined and raised
   (:class:`~inboxguard.PayloadMismatchError`); a fresh or duplicate entry is
   handed to the caller's block (:class:`HandOver`);
6. the block's exit (:class:`BlockExit`): when the caller's transaction was
   committed or rolled back inside the block, or a commit was refused in it,
   a :class:`~inboxguard.ConfigurationError` names the mistake, whether the
   block raised or not (the driver then rolls back; when the flow ends in an
   error of any kind, it rolls back to the savepoint; after a normal end it
   releases it, the database's word that the claim's transaction is intact);
7. after a normal exit of the block, a fresh command's assigned result is
   stored on the caller's connection; an update that matches no row is an
   error.

The drivers in :mod:`._drive` (one sync, one async, side by side) only
perform these requests, the way ``httpx`` drives ``Auth.auth_flow``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Executable
from sqlalchemy.engine import Dialect as SaDialect
from sqlalchemy.engine import Result
from sqlalchemy.exc import DBAPIError

from inboxguard._core import faults
from inboxguard._core.clock import Clock
from inboxguard._core.retention import RetentionPolicy
from inboxguard._telemetry import Telemetry, telemetry_for
from inboxguard.errors import ConfigurationError, PayloadMismatchError
from inboxguard.inbox._decide import (
    Delivery,
    busy_error,
    prepare,
    refusal_values,
    result_json,
    stale_error,
    verdict,
)
from inboxguard.inbox._records import InboxEntry, QuarantineReason
from inboxguard.sql.dialects import Claim, InboxStatements, inbox_statements_for
from inboxguard.sql.errors import INBOX_SCHEMA, is_busy, is_retryable, schema_required
from inboxguard.sql.tables import InboxTables

__all__ = [
    "SQLALCHEMY_BOUNDARY",
    "BlockExit",
    "BoundaryAdvice",
    "Connect",
    "Execute",
    "GuardFlow",
    "GuardFlows",
    "HandOver",
    "Request",
    "WriteQuarantine",
]


@dataclass(frozen=True, slots=True)
class Connect:
    """Check the caller's session; reply with its connection's SQLAlchemy dialect."""


@dataclass(frozen=True, slots=True)
class Execute:
    """Run one statement on the caller's connection; reply with its result."""

    statement: Executable
    params: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class WriteQuarantine:
    """Upsert a quarantine record in a transaction of its own; reply True once
    written, False (after logging the record) when the write failed.

    ``statement`` builds the upsert for the dialect of the connection the
    driver writes on.
    """

    statement: Callable[[SaDialect], Executable]
    values: dict[str, Any]


@dataclass(frozen=True, slots=True)
class HandOver:
    """Run the caller's block with ``entry``; reply with its :class:`BlockExit`."""

    entry: InboxEntry


@dataclass(frozen=True, slots=True)
class BlockExit:
    """What the driver saw when the caller's block ended.

    ``kept``: the caller's transaction at exit is the one the claim was made
    in, still open (savepoints inside the block may come and go);
    ``error``: what the block raised, None when it exited normally. When the
    block raised and the flow ends without an error of its own, the driver
    re-raises ``error``.
    """

    kept: bool
    error: Exception | None = None


Request = Connect | Execute | WriteQuarantine | HandOver
GuardFlow = Generator[Request, Any, None]


class GuardFlows:
    """Builds the flows of one inbox: its tables, retention, clock and lock timeout."""

    def __init__(
        self,
        tables: InboxTables,
        retention: RetentionPolicy,
        clock: Clock,
        lock_timeout: dt.timedelta | None,
        *,
        boundary: BoundaryAdvice | None = None,
        telemetry: Telemetry | None = None,
        partitioned: bool = False,
    ) -> None:
        self._tables = tables
        self._partitioned = partitioned
        self._boundary = boundary or SQLALCHEMY_BOUNDARY
        self.telemetry = telemetry or telemetry_for(False)
        self._retention = retention
        self._clock = clock
        self._lock_timeout = lock_timeout
        self._dialects: dict[SaDialect, InboxStatements] = {}  # per engine: each one is checked

    def guard(
        self,
        consumer: str,
        command_id: str,
        payload: object,
        exclude: Iterable[str],
        sent_at: dt.datetime | None,
        details: Mapping[str, Any] | None,
    ) -> GuardFlow:
        """The guard of one delivery, from validation to the stored result."""
        delivery = self._prepare(consumer, command_id, payload, exclude, details)
        stale = stale_error(delivery, sent_at, self._retention) if sent_at is not None else None
        # The one place a claim's outcome is decided, for every adapter and driver.
        probe = self.telemetry.claim(delivery.consumer, delivery.command_id)
        try:
            dialect = self.dialect((yield Connect()))
            if stale is not None:
                yield self._refusal(delivery, QuarantineReason.BEYOND_RETENTION)
                raise stale
            claim = yield from _claim(dialect, delivery)
            found = verdict(delivery, claim)
            if isinstance(found, PayloadMismatchError):
                yield self._refusal(
                    delivery, QuarantineReason.PAYLOAD_MISMATCH, stored_digest=found.stored_digest
                )
                raise found
        except BaseException as error:
            probe.failed(error)
            raise
        probe.decided("duplicate" if found.duplicate else "fresh")
        if faults.hook is not None and not found.duplicate:
            faults.reach(faults.FaultPoint.HANDLER_RUNS, delivery.command_id)
        end: BlockExit = yield HandOver(found)
        if not end.kept:
            if end.error is not None and is_retryable(end.error):
                # A lost connection or a lock timeout inside the block ended
                # the transaction: the error says why, and a retry is safe.
                raise end.error
            raise _boundary_error(delivery, self._boundary) from end.error
        if end.error is None and found._result_set and found.result is not None:  # noqa: SLF001
            params = dialect.store_result_params(
                delivery.consumer, delivery.command_id, result_json(found)
            )
            stored = yield Execute(dialect.store_result_stmt, params)
            if stored.rowcount != 1:
                raise _vanished_error(delivery, stored.rowcount)
        if faults.hook is not None and end.error is None:
            faults.reach(faults.FaultPoint.BEFORE_COMMIT, delivery.command_id)

    def quarantine(
        self,
        consumer: str,
        command_id: str,
        payload: object,
        reason: str,
        exclude: Iterable[str],
        details: Mapping[str, Any] | None,
    ) -> WriteQuarantine:
        """The request that refuses a delivery durably (no guard, no claim)."""
        return self._refusal(self._prepare(consumer, command_id, payload, exclude, details), reason)

    def dialect(self, sa_dialect: SaDialect) -> InboxStatements:
        """The (cached) inbox dialect of a SQLAlchemy dialect."""
        found = self._dialects.get(sa_dialect)
        if found is None:
            found = inbox_statements_for(
                sa_dialect, self._tables, self._lock_timeout, partitioned=self._partitioned
            )
            self._dialects[sa_dialect] = found
        return found

    def _upsert_quarantine(self, sa_dialect: SaDialect) -> Executable:
        return self.dialect(sa_dialect).upsert_quarantine()

    def _prepare(
        self,
        consumer: str,
        command_id: str,
        payload: object,
        exclude: Iterable[str],
        details: Mapping[str, Any] | None,
    ) -> Delivery:
        return prepare(
            consumer,
            command_id,
            payload,
            exclude,
            details,
            retention=self._retention,
            clock=self._clock,
        )

    def _refusal(
        self, delivery: Delivery, reason: str, *, stored_digest: str | None = None
    ) -> WriteQuarantine:
        values = refusal_values(delivery, reason, stored_digest=stored_digest)
        return WriteQuarantine(self._upsert_quarantine, values)


@dataclass(frozen=True, slots=True)
class BoundaryAdvice:
    """How a driver's caller ends its transaction by mistake inside the block
    (``causes``) and how to fail one step safely instead (``savepoint``), for
    the error the flow raises when the transaction did not outlive the block."""

    causes: str
    savepoint: str


#: The advice for SQLAlchemy sessions and connections (the sync and async drivers).
SQLALCHEMY_BOUNDARY = BoundaryAdvice(
    causes=(
        "session.commit(), session.rollback(), conn.commit(), conn.rollback(), or a failed flush"
    ),
    savepoint="session.begin_nested() (a savepoint)",
)


def _boundary_error(delivery: Delivery, advice: BoundaryAdvice) -> ConfigurationError:
    msg = (
        f"the transaction of command {delivery.command_id!r} (consumer"
        f" {delivery.consumer!r}) was committed or rolled back inside the guarded block"
        f" ({advice.causes}): the inbox row no longer commits with the block's changes, so"
        " the command could be lost or applied twice. Never commit or roll back inside"
        f" the block; wrap a step that may fail in {advice.savepoint}"
        " and let the caller end the transaction after the block. Roll back now"
    )
    return ConfigurationError(msg)


def _vanished_error(delivery: Delivery, rowcount: int) -> ConfigurationError:
    msg = (
        f"storing the result of command {delivery.command_id!r} (consumer"
        f" {delivery.consumer!r}) matched {rowcount} inbox rows instead of 1: its claim"
        " was deleted or rolled back inside the guarded block. Never delete the inbox"
        " row or roll back past the claim inside the block. Roll back now"
    )
    return ConfigurationError(msg)


def _claim(dialect: InboxStatements, delivery: Delivery) -> Generator[Execute, Result[Any], Claim]:
    """Run the dialect's claim one :class:`Execute` at a time; a busy database
    (thrown in by the driver) becomes :class:`~inboxguard.InProgressError`.
    A statement's error is thrown into the dialect's steps first, so the
    dialect can put a connection setting back before it passes on."""
    steps = dialect.claim(delivery.params)
    try:
        step = next(steps)
        while True:
            try:
                reply = yield Execute(*step)
            except DBAPIError as error:
                step = steps.throw(error)
            else:
                step = steps.send(reply)
    except StopIteration as done:
        claim: Claim = done.value
        return claim
    except DBAPIError as error:
        if is_busy(error):
            raise busy_error(delivery) from error
        # A database without the inbox tables: say how to create them.
        with schema_required(INBOX_SCHEMA):
            raise
