"""The whole guard as one sans-I/O flow.

:meth:`GuardFlows.guard` is a generator that makes every decision of a guarded
delivery, in one order, and asks for each piece of I/O by yielding a request:

1. validate the delivery and compute its digest (no I/O; bad input raises);
2. :class:`Connect`: the driver checks the caller's session and replies with
   its database's SQLAlchemy dialect. A configuration error (a wrong object,
   AUTOCOMMIT, a session over two engines) is raised here, before any
   refusal, by both drivers, which then open the savepoint the claim and the
   block run in (:mod:`inboxguard.sql.savepoint`);
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
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NoReturn, TypeVar

from sqlalchemy import Executable
from sqlalchemy.engine import Dialect as SaDialect
from sqlalchemy.engine import Result
from sqlalchemy.exc import DBAPIError

from inboxguard._core import faults
from inboxguard._core.clock import Clock
from inboxguard._core.retention import RetentionPolicy
from inboxguard._telemetry import Telemetry, telemetry_for
from inboxguard.errors import PayloadMismatchError
from inboxguard.inbox._decide import (
    SQLALCHEMY_BOUNDARY,
    BoundaryAdvice,
    Delivery,
    boundary_error,
    busy_error,
    prepare,
    refusal_values,
    result_json,
    results_vanished_error,
    stale_error,
    verdict,
)
from inboxguard.inbox._records import InboxEntry, QuarantineReason
from inboxguard.sql.dialects import InboxStatements, inbox_statements_for
from inboxguard.sql.dialects.base.inbox import Steps
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
    "resume",
    "run_steps",
    "unexpected",
]

_E = TypeVar("_E")
_R = TypeVar("_R")
_T = TypeVar("_T")


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

    ``statement`` builds the upsert for the dialect of the connection a SQL
    driver writes on; a store that keeps its records its own way (Redis)
    leaves it None.
    """

    statement: Callable[[SaDialect], Executable] | None
    values: dict[str, Any]


@dataclass(frozen=True, slots=True)
class HandOver(Generic[_E]):
    """Run the caller's block with ``entry`` (an :class:`~._records.InboxEntry`,
    or a batch's :class:`~._batch.InboxBatch`); reply with its :class:`BlockExit`."""

    entry: _E


@dataclass(frozen=True, slots=True)
class BlockExit:
    """What the driver saw when the caller's block ended.

    ``kept``: the caller's transaction at exit is the one the claim was made
    in, still open (savepoints inside the block may come and go);
    ``error``: what the block raised, None when it exited normally. When the
    block raised and the flow ends without an error of its own, the driver
    re-raises ``error``. ``queued``: for a store whose block only queues its
    writes (a Redis pipeline), the commands the block queued.
    """

    kept: bool
    error: Exception | None = None
    queued: tuple[tuple[Any, ...], ...] = ()


Request = Connect | Execute | WriteQuarantine | HandOver[InboxEntry]
GuardFlow = Generator[Request, Any, None]


def resume(
    flow: Generator[_R, Any, None], reply: Any = None, error: BaseException | None = None
) -> _R | None:
    """Send the reply (or throw the error) into a flow; its next request, None
    once it is done. Every driver of every flow steps it this way."""
    try:
        return flow.send(reply) if error is None else flow.throw(error)
    except StopIteration:
        return None


def unexpected(request: object) -> NoReturn:
    """A driver met a request it does not perform at this point."""
    msg = f"the guard flow asked for {request!r} out of order"
    raise RuntimeError(msg)


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
        self.tables = tables
        self._partitioned = partitioned
        self._boundary = boundary or SQLALCHEMY_BOUNDARY
        self.telemetry = telemetry or telemetry_for(False)
        self.retention = retention
        self.clock = clock
        self.lock_timeout = lock_timeout
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
        stale = stale_error(delivery, sent_at, self.retention) if sent_at is not None else None
        # The one place a claim's outcome is decided, for every adapter and driver.
        probe = self.telemetry.claim(delivery.consumer, delivery.command_id)
        try:
            dialect = self.dialect((yield Connect()))
            if stale is not None:
                yield self.refusal(delivery, QuarantineReason.BEYOND_RETENTION)
                raise stale
            claim = yield from run_steps(
                dialect.claim(delivery.params), delivery.consumer, [delivery.command_id]
            )
            found = verdict(delivery, claim)
            if isinstance(found, PayloadMismatchError):
                yield self.refusal(
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
            raise boundary_error(
                delivery.consumer, [delivery.command_id], self._boundary
            ) from end.error
        if end.error is None and found._result_set and found.result is not None:  # noqa: SLF001
            params = dialect.store_result_params(
                delivery.consumer, delivery.command_id, result_json(found)
            )
            stored = yield Execute(dialect.store_result_stmt, params)
            if stored.rowcount != 1:
                raise results_vanished_error(
                    delivery.consumer, [delivery.command_id], stored.rowcount
                )
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
        return self.refusal(self._prepare(consumer, command_id, payload, exclude, details), reason)

    def dialect(self, sa_dialect: SaDialect) -> InboxStatements:
        """The (cached) inbox dialect of a SQLAlchemy dialect."""
        found = self._dialects.get(sa_dialect)
        if found is None:
            found = inbox_statements_for(
                sa_dialect, self.tables, self.lock_timeout, partitioned=self._partitioned
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
            retention=self.retention,
            clock=self.clock,
        )

    def refusal(
        self, delivery: Delivery, reason: str, *, stored_digest: str | None = None
    ) -> WriteQuarantine:
        """The request that quarantines ``delivery`` (a batch's entries too)."""
        values = refusal_values(delivery, reason, stored_digest=stored_digest)
        return WriteQuarantine(self._upsert_quarantine, values)


def run_steps(
    steps: Steps[_T], consumer: str, command_ids: Sequence[str]
) -> Generator[Execute, Result[Any], _T]:
    """Run a dialect's statement steps (a claim, a batch's read) one
    :class:`Execute` at a time; a busy database (thrown in by the driver)
    becomes :class:`~inboxguard.InProgressError` naming ``command_ids``.
    A statement's error is thrown into the steps first, so the dialect can
    put a connection setting back before it passes on."""
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
        value: _T = done.value
        return value
    except DBAPIError as error:
        if is_busy(error):
            raise busy_error(consumer, command_ids) from error
        # A database without the inbox tables: say how to create them.
        with schema_required(INBOX_SCHEMA):
            raise
