"""One delivery, decided once: the sans-I/O script every consumer drives.

:func:`deliver` is a generator that makes every decision of one delivery, in
one order, from what a framework read off it (a :class:`Reading`) and the
consumer's fixed :class:`Rules`, and asks for each piece of I/O by yielding a
request:

1. a body that could not be decoded (or a delivery the consumer refuses
   before decoding it) is unusable;
2. the command ID, from the consumer's getter (a failure of the user's
   callable is an :class:`~inboxguard.InvalidCommandError`);
3. the sent time, and the consumer's rule for a delivery without one
   (:class:`~._sent_time.SentTimeCheck`); the age itself is judged by the
   guard, which refuses a ``sent_at`` older than the evidence horizon;
4. :class:`Run`: the driver opens the transaction, claims through the
   store's guard, runs the handler and commits; it replies with the error
   that ended it, or None;
5. the outcome of a failed attempt (the one outcome policy of
   :mod:`._outcome`: done, refused, retried, exhausted, failed, requeued);
6. :class:`Record`: a refusal, an exhausted delivery and (where the rules
   say so) a final failure must be held by a quarantine record before the
   broker may let the delivery go; the driver writes it and replies whether
   a record now holds it;
7. the :class:`Settlement`: the :class:`Step` the driver performs with its
   framework's verbs, through its own step -> verb table.

The drivers (one per framework, sync or awaited) only perform the requests,
the way :mod:`inboxguard.inbox._drive` performs the guard's flow. Imports no
framework and does no I/O.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from inboxguard import QuarantineReason
from inboxguard.adapters._evidence import Refused, command_id_of
from inboxguard.adapters._outcome import Disposition, Outcome, outcome_of
from inboxguard.errors import InboxGuardError

__all__ = [
    "Reading",
    "Record",
    "Request",
    "Rules",
    "Run",
    "Script",
    "Settlement",
    "Step",
    "deliver",
    "reason_of",
    "step_of",
]


class Step(enum.Enum):
    """What a consumer does with the message after one attempt."""

    #: Committed (or a duplicate): ack.
    ACK = "ack"
    #: Refused: reject without requeue (the broker dead-letters it).
    REJECT = "reject"
    #: Publish the copy for the next attempt, then ack the original.
    RETRY = "retry"
    #: The last attempt failed: quarantine as ``retries_exhausted``, then reject.
    GIVE_UP = "give_up"
    #: No quarantine record holds a refused or exhausted delivery (the write
    #: failed): publish a copy with the same attempt number, due after the
    #: retry delay, then ack the original. Never dropped, never acked alone.
    REQUEUE = "requeue"
    #: A failure left to the framework's own failure path (Celery marks the
    #: task failed, Dramatiq's Retries retries it); a consumer without one
    #: never reaches this step.
    FAIL = "fail"


@dataclass(frozen=True, slots=True)
class Rules:
    """How one consumer judges its deliveries (fixed when it is declared).

    ``sent_time`` is the rule for the sent time read off a delivery (a
    :class:`~._sent_time.SentTimeCheck`, or the time as it is where no
    producer stamps it: Orch8's engine).
    ``retry_failures``, ``failure_path_retries`` and ``transient`` are
    :func:`~._outcome.outcome_of`'s. ``refuse_unreadable``: a delivery whose
    body, command ID or sent time cannot be read is refused outright (the
    consumers that read their own deliveries), rather than judged like any
    failure (Celery, Dramatiq). ``record_failures``: a failure handed to the
    framework's failure path is quarantined first (Celery's path dead-letters
    it, or drops it on a broker without a dead-letter queue).
    """

    sent_time: Callable[[dt.datetime | None], dt.datetime | None]
    retry_failures: bool = False
    failure_path_retries: bool = False
    refuse_unreadable: bool = False
    record_failures: bool = False
    transient: tuple[type[BaseException], ...] = ()


@dataclass(frozen=True, slots=True)
class Reading:
    """What a framework read off one delivery, with nothing left to do but decide.

    ``record``: the delivery as its quarantine record keeps it (the decoded
    payload, the details), its command ID not yet known. ``unread``: the
    record of a delivery refused before its command ID is known (default:
    ``record``). ``command_id`` and ``sent_at`` read them off the delivery
    (either may raise). ``last_attempt`` says whether the framework would
    deliver the message again after ``error``. A ``direct`` call (no
    delivery: a plain function call) is not held to the sent time rule and
    records nothing: its caller gets the error.
    """

    record: Refused
    command_id: Callable[[], Any]
    sent_at: Callable[[], dt.datetime | None]
    last_attempt: Callable[[Exception], bool]
    decode_error: Exception | None = None
    unread: Refused | None = None
    direct: bool = False


@dataclass(frozen=True, slots=True)
class Run:
    """Open the transaction, guard, run the handler, commit; reply with the
    error that ended it, or None once committed."""

    command_id: str
    payload: Any
    sent_at: dt.datetime | None
    details: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Record:
    """Make sure a quarantine record holds the delivery (``reason`` None: the
    error's own); reply True once one does, False when none could be written."""

    error: Exception
    refused: Refused
    reason: str | None


Request = Run | Record


@dataclass(frozen=True, slots=True)
class Settlement:
    """What a driver does with the delivery, and what its log lines name.

    ``consumer`` is the consumer the delivery is filed under; ``name`` is
    the command ID, or the message key of a delivery refused
    before it was read; ``shown`` is the delivery as a refusal's log line
    shows it. ``outcome`` and ``error`` are None after a commit.
    """

    step: Step
    consumer: str
    name: str | None
    shown: Mapping[str, Any]
    command_id: str | None = None
    sent_at: dt.datetime | None = None
    outcome: Outcome | None = None
    error: Exception | None = None


Script = Generator[Request, Any, Settlement]


def deliver(reading: Reading, rules: Rules) -> Script:
    """Decide one delivery (see the module docstring); return its settlement."""
    record = unread = reading.unread or reading.record
    command_id: str | None = None
    sent_at: dt.datetime | None = None
    try:
        if reading.decode_error is not None:
            raise reading.decode_error
        command_id = command_id_of(reading.command_id)
        sent_at = reading.sent_at()
        record = reading.record.filed_under(command_id)
        if not reading.direct:
            sent_at = rules.sent_time(sent_at)
    except Exception as bad:
        if rules.refuse_unreadable:
            shown = Settlement(
                Step.REJECT, unread.consumer, unread.message_id, unread.details, command_id, sent_at
            )
            refused = Outcome(Disposition.REFUSE)
            return (yield from _settled(refused, bad, record, shown, reading, rules))
        error: Exception = bad
    else:
        ran = yield Run(command_id, record.payload, sent_at, record.details)
        if ran is None:
            return Settlement(
                Step.ACK, record.consumer, command_id, record.details, command_id, sent_at
            )
        error = ran
    outcome = outcome_of(
        error,
        last_attempt=lambda: reading.last_attempt(error),
        retry_failures=rules.retry_failures,
        failure_path_retries=rules.failure_path_retries,
        transient=rules.transient,
    )
    shown = Settlement(
        Step.REJECT, record.consumer, command_id, record.details, command_id, sent_at
    )
    return (yield from _settled(outcome, error, record, shown, reading, rules))


def _settled(
    outcome: Outcome,
    error: Exception,
    record: Refused,
    settlement: Settlement,
    reading: Reading,
    rules: Rules,
) -> Script:
    """The settlement of a failed attempt, once the records it needs are written."""
    if reading.direct:
        return replace(settlement, step=step_of(outcome), outcome=outcome, error=error)
    if outcome.needs_record:
        outcome = outcome.recorded((yield Record(error, record, reason_of(outcome))))
    elif outcome.failed and rules.record_failures:
        # A handler's own error is recorded as such; an inboxguard error under its code.
        failed_as = None if isinstance(error, InboxGuardError) else QuarantineReason.HANDLER_FAILED
        if not (yield Record(error, record, failed_as)):
            return replace(settlement, step=Step.REQUEUE, outcome=outcome, error=error)
    return replace(settlement, step=step_of(outcome), outcome=outcome, error=error)


def step_of(outcome: Outcome, *, failure: Step = Step.FAIL) -> Step:
    """The step a failed attempt's outcome settles with.

    In order: back to the broker when no quarantine record holds a refused
    or exhausted delivery (``REQUEUE``); a refusal is rejected; an outcome
    handed to the framework's own failure path is ``failure`` (``FAIL``, or
    the verb an adapter with no failure path of its own picks: Orch8 reads
    the handler's ``retryable``); an exhausted retry gives up; any other is
    retried.
    """
    if outcome.requeued:
        return Step.REQUEUE
    if outcome.refused:
        return Step.REJECT
    if outcome.failed:
        return failure
    if outcome.exhausted:
        return Step.GIVE_UP
    return Step.RETRY


def reason_of(outcome: Outcome) -> str | None:
    """The quarantine reason the adapter writes (None: the error's own)."""
    return QuarantineReason.RETRIES_EXHAUSTED if outcome.exhausted else None
