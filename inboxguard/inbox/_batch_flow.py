"""The batch claim as one sans-I/O flow, in the order of the single guard's.

:meth:`BatchFlows.guard_batch` makes every decision of a batch and asks for
each piece of I/O with the requests of :mod:`._flow`, the single guard's
(its :class:`~._flow.HandOver` carries the :class:`~._batch.InboxBatch`), and
refuses with the single guard's errors (:mod:`._decide`), naming the
batch's commands:

1. validate every command and compute its digest (no I/O): a bad element
   raises, naming its index, before anything is written;
2. :class:`~._flow.Connect`: the driver checks the caller's session
   (AUTOCOMMIT, a wrong object) before any refusal;
3. each command whose ``sent_at`` is older than the horizon is quarantined
   and refused, alone;
4. the claim of the batch's distinct command IDs in sorted order, in as few
   statements as the database allows (:mod:`inboxguard.sql.dialects.base.batch`).
   A lock timeout, deadlock or serialization failure refuses the whole
   batch with :class:`~inboxguard.InProgressError` (the database has
   aborted the statement, on PostgreSQL the whole transaction);
5. each claimed ID gets its verdict (:func:`._decide.verdict`); a mismatch
   is quarantined and refused, alone. A later entry with an ID seen earlier
   in the batch is judged as a redelivery of that earlier one;
6. each fresh entry, in input order, reaches the fault point
   ``HANDLER_RUNS`` (:mod:`inboxguard._core.faults`), as the single guard's
   fresh entry does; then the caller's block runs with the
   :class:`~._batch.InboxBatch`; at its exit the transaction must still be
   the one the claim was made in;
7. after a normal exit, the released entries' rows are deleted and the
   results assigned to fresh entries are stored, in one statement each
   (PostgreSQL) or one per 500 entries; then each fresh entry (released or
   not) reaches ``BEFORE_COMMIT``, before the caller commits.

A fault point costs one ``None`` check per batch when no hook is armed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Dialect as SaDialect

from inboxguard._core import faults
from inboxguard._core.clock import checked_now
from inboxguard._core.digest import canonical_json
from inboxguard._core.identity import validate_identity
from inboxguard.errors import (
    ConfigurationError,
    PayloadEncodingError,
    PayloadMismatchError,
)
from inboxguard.inbox._batch import BatchCommand, BatchEntry, InboxBatch, batch_commands
from inboxguard.inbox._decide import (
    SQLALCHEMY_BOUNDARY,
    Delivery,
    boundary_error,
    prepare,
    results_vanished_error,
    stale_error,
    verdict,
)
from inboxguard.inbox._flow import (
    BlockExit,
    Connect,
    Execute,
    GuardFlows,
    HandOver,
    WriteQuarantine,
    run_steps,
)
from inboxguard.inbox._records import QuarantineReason
from inboxguard.sql.dialects import BatchStatements, Claim, batch_for
from inboxguard.sql.dialects.base.inbox import CLAIM_ATTEMPTS, claim_vanished_error

__all__ = ["BatchFlow", "BatchFlows", "BatchRequest"]


BatchRequest = Connect | Execute | WriteQuarantine | HandOver[InboxBatch]
BatchFlow = Generator[BatchRequest, Any, None]


class BatchFlows:
    """Builds the batch flows of one inbox, on its single guard's flows (their
    tables, retention, clock, lock timeout, statements and refusals)."""

    def __init__(self, flows: GuardFlows) -> None:
        self._flows = flows
        self.telemetry = flows.telemetry
        self._statements: dict[SaDialect, BatchStatements] = {}

    def guard_batch(self, consumer: str, commands: object, exclude: Iterable[str]) -> BatchFlow:
        """The flow of one batch, from validation to the stored results."""
        validate_identity(consumer, "consumer")
        items = batch_commands(commands)
        now = checked_now(self._flows.clock)
        excluded = exclude if isinstance(exclude, str) else tuple(exclude)
        deliveries = [self._prepare(i, consumer, c, excluded, now) for i, c in enumerate(items)]
        stale = [
            self._stale(i, d, c) for i, (d, c) in enumerate(zip(deliveries, items, strict=True))
        ]
        return self._flow(consumer, items, deliveries, stale)

    def _flow(
        self,
        consumer: str,
        items: list[BatchCommand],
        deliveries: list[Delivery],
        stale: list[Any],
    ) -> BatchFlow:
        statements = self.statements((yield Connect()))
        # One claim probe per command, started before any statement, as guard() does.
        probes = [self.telemetry.claim(consumer, d.command_id) for d in deliveries]
        try:
            batch = yield from self._decide(consumer, statements, items, deliveries, stale)
        except BaseException as error:
            for probe in probes:
                probe.failed(error)
            raise
        for probe, entry in zip(probes, batch, strict=True):
            if entry.error is not None:
                probe.failed(entry.error)
            else:
                probe.decided(entry.outcome)
        if faults.hook is not None:
            _reach(faults.FaultPoint.HANDLER_RUNS, batch)
        end: BlockExit = yield HandOver(batch)
        if not end.kept:
            raise boundary_error(
                consumer, [e.command_id for e in batch], SQLALCHEMY_BOUNDARY
            ) from end.error
        if end.error is None:
            yield from self._store_results(statements, consumer, batch)
            if faults.hook is not None:
                _reach(faults.FaultPoint.BEFORE_COMMIT, batch)

    def _decide(
        self,
        consumer: str,
        statements: BatchStatements,
        items: list[BatchCommand],
        deliveries: list[Delivery],
        stale: list[Any],
    ) -> Generator[BatchRequest, Any, InboxBatch]:
        """Refuse the stale commands, claim the others, judge every entry."""
        entries: list[BatchEntry | None] = [None] * len(items)
        for i, error in enumerate(stale):
            if error is not None:
                refusal = self._flows.refusal(deliveries[i], QuarantineReason.BEYOND_RETENTION)
                written = yield refusal
                entries[i] = _entry(
                    i, deliveries[i], items[i], error=error, quarantine_recorded=written is True
                )
        first: dict[str, int] = {}  # the entry that claims each ID
        for i, d in enumerate(deliveries):
            if entries[i] is None:
                first.setdefault(d.command_id, i)
        keys = sorted(first)
        claims: dict[str, Claim] = {}
        if keys and statements.reads_first:
            # Judge (and quarantine) what is stored before the insert takes
            # the write lock (SQLite: one writer at a time).
            claims = yield from run_steps(statements.read(consumer, keys), consumer, keys)
            keys = [k for k in keys if k not in claims]
            yield from self._judge_all(entries, deliveries, items, first, claims)
            yield from self._refuse_conflicting_repeats(entries, deliveries, items, first, keys)
        if keys:
            claims.update((yield from self._claim(statements, consumer, keys, deliveries, first)))
        yield from self._judge_all(entries, deliveries, items, first, claims)
        return InboxBatch([e for e in entries if e is not None])

    def _judge_all(
        self,
        entries: list[BatchEntry | None],
        deliveries: Sequence[Delivery],
        items: Sequence[BatchCommand],
        first: Mapping[str, int],
        claims: Mapping[str, Claim],
    ) -> Generator[WriteQuarantine, Any, None]:
        """Judge, in input order, every entry not yet judged whose ID was claimed."""
        for i, d in enumerate(deliveries):
            if entries[i] is None and d.command_id in claims:
                source = entries[first[d.command_id]] if first[d.command_id] != i else None
                entries[i] = yield from self._judge(i, d, items[i], claims[d.command_id], source)

    def _refuse_conflicting_repeats(
        self,
        entries: list[BatchEntry | None],
        deliveries: Sequence[Delivery],
        items: Sequence[BatchCommand],
        first: Mapping[str, int],
        absent: Sequence[str],
    ) -> Generator[WriteQuarantine, Any, None]:
        """Refuse, before the insert, the repeats of an absent ID whose payload
        differs from the entry that will claim it."""
        absent_keys = set(absent)
        for i, d in enumerate(deliveries):
            claimer = deliveries[first.get(d.command_id, i)]
            conflicting = claimer is not d and d.digest != claimer.digest
            if entries[i] is None and conflicting and d.command_id in absent_keys:
                entries[i] = yield from self._judge(
                    i, d, items[i], Claim(False, claimer.digest), None
                )

    def _judge(
        self,
        i: int,
        delivery: Delivery,
        item: BatchCommand,
        claim: Claim,
        source: BatchEntry | None,
    ) -> Generator[WriteQuarantine, Any, BatchEntry]:
        """The entry of one command; a mismatch is quarantined first."""
        if source is not None and source.fresh:
            if delivery.digest == source.digest:  # a repeat of a command this batch applies
                return _entry(i, delivery, item, duplicate=True, source=source)
            claim = Claim(False, source.digest)
        found = verdict(delivery, claim)
        if isinstance(found, PayloadMismatchError):
            written = yield self._flows.refusal(
                delivery, QuarantineReason.PAYLOAD_MISMATCH, stored_digest=found.stored_digest
            )
            return _entry(i, delivery, item, error=found, quarantine_recorded=written is True)
        return _entry(
            i,
            delivery,
            item,
            duplicate=found.duplicate,
            result=found.result,
            result_expired=found.result_expired,
        )

    def _claim(
        self,
        statements: BatchStatements,
        consumer: str,
        keys: list[str],
        deliveries: Sequence[Delivery],
        first: Mapping[str, int],
    ) -> Generator[BatchRequest, Any, dict[str, Claim]]:
        """Claim ``keys``; read again the ones the claim could not see, and
        claim again those whose row vanished (at most CLAIM_ATTEMPTS times)."""
        shared = _shared(deliveries[first[keys[0]]].params)
        rows = [{"command_id": k, "digest": deliveries[first[k]].digest} for k in keys]
        found: dict[str, Claim] = {}
        pending = rows
        for attempt in range(CLAIM_ATTEMPTS):
            if attempt > 0:
                ids = [r["command_id"] for r in pending]
                found.update((yield from run_steps(statements.read(consumer, ids), consumer, ids)))
                pending = [r for r in pending if r["command_id"] not in found]
            if not pending:
                return found
            ids = [r["command_id"] for r in pending]
            found.update((yield from run_steps(statements.claim(shared, pending), consumer, ids)))
            pending = [r for r in pending if r["command_id"] not in found]
            if not pending:
                return found
        raise claim_vanished_error(consumer, [r["command_id"] for r in pending])

    def _store_results(
        self, statements: BatchStatements, consumer: str, batch: InboxBatch
    ) -> Generator[Execute, Any, None]:
        released = [e.command_id for e in batch if e.released]
        if released:
            gone = 0
            for stmt, params in statements.release(consumer, released):
                gone += (yield Execute(stmt, params)).rowcount
            if gone != len(released):
                raise results_vanished_error(consumer, released, gone, releasing=True)
        results = [
            (e.command_id, canonical_json(e.result, root=f"batch[{e.index}].result"))
            for e in batch
            if e._result_set and not e.released and e.result is not None  # noqa: SLF001
        ]
        if not results:
            return
        matched = 0
        for stmt, params in statements.store_results(consumer, results):
            matched += (yield Execute(stmt, params)).rowcount
        if matched != len(results):
            raise results_vanished_error(consumer, [cid for cid, _ in results], matched)

    def statements(self, sa_dialect: SaDialect) -> BatchStatements:
        """The (cached) batch statements of a SQLAlchemy dialect (checked
        the way the single claim checks it)."""
        found = self._statements.get(sa_dialect)
        if found is None:
            flows = self._flows
            flows.dialect(sa_dialect)  # the single claim's checks, and its upsert
            found = batch_for(sa_dialect, flows.tables, flows.lock_timeout)
            self._statements[sa_dialect] = found
        return found

    def _stale(self, index: int, delivery: Delivery, item: BatchCommand) -> Any:
        """The refusal of a command sent before the horizon, or None."""
        if item.sent_at is None:
            return None
        try:
            return stale_error(delivery, item.sent_at, self._flows.retention)
        except ConfigurationError as error:
            msg = f"commands[{index}].sent_at (command {item.command_id!r}): {error}"
            raise ConfigurationError(msg) from None

    def _prepare(
        self, index: int, consumer: str, item: BatchCommand, excluded: Any, now: dt.datetime
    ) -> Delivery:
        """Validate one command as :func:`._decide.prepare` does, naming its index."""
        try:
            validate_identity(item.command_id, f"commands[{index}].command_id")
            return prepare(
                consumer,
                item.command_id,
                item.payload,
                excluded,
                item.details,
                retention=self._flows.retention,
                clock=lambda: now,
            )
        except PayloadEncodingError as error:
            msg = f"commands[{index}] (command {item.command_id!r}): {error}"
            raise PayloadEncodingError(msg, path=f"commands[{index}].{error.path}") from None


def _shared(params: Mapping[str, Any]) -> dict[str, Any]:
    """The values every row of the batch shares (one clock reading)."""
    keep = ("consumer", "processed_at", "expires_at", "result_expires_at")
    return {k: params[k] for k in keep}


def _reach(point: faults.FaultPoint, batch: InboxBatch) -> None:
    """Reach ``point`` once per fresh entry, in input order, keyed by its
    command ID: the seams the single guard reaches for its fresh entry."""
    for entry in batch:
        if entry.fresh:
            faults.reach(point, entry.command_id)


def _entry(i: int, delivery: Delivery, item: BatchCommand, **decided: Any) -> BatchEntry:
    return BatchEntry(
        index=i,
        consumer=delivery.consumer,
        command_id=delivery.command_id,
        digest=delivery.digest,
        payload=item.payload,
        **decided,
    )
