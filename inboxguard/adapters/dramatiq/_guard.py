"""The guarded actor function: one transaction around claim, body and result.

The middleware replaces a guarded actor's ``fn`` with a :class:`GuardedFn`
(or, for an ``async def`` actor, the coroutine function of
``_async_guard``), so the transaction lives inside the actor call itself.
Nothing on this path depends on a middleware hook whose failure Dramatiq
would log and swallow: every outcome is the actor's return value or the
exception it raises. :class:`GuardCore` holds what both flavours share: the
inputs of the guard and the mapping of a failure to what Dramatiq must do.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
import random
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from dramatiq import Broker, Retry
from dramatiq.broker import MessageProxy
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from inboxguard import InboxStore, QuarantineReason
from inboxguard._core import faults
from inboxguard._core.extract import Getter, payload_of
from inboxguard.adapters._delivery import judged_from
from inboxguard.adapters._evidence import Refused, command_id_of, record_refusal
from inboxguard.adapters._outcome import (
    Outcome,
    log_duplicate,
    log_refusal,
    log_requeued,
    outcome_of,
)
from inboxguard.adapters._results import dramatiq_reads, kept
from inboxguard.adapters._sent_time import SentTimeCheck
from inboxguard.adapters._stores import transaction
from inboxguard.adapters.dramatiq._windows import retries_of
from inboxguard.errors import (
    CommandRejectedError,
    InvalidCommandError,
    PayloadEncodingError,
)

__all__ = [
    "DUE_OPTION",
    "NEVER_RETRIED",
    "GuardCore",
    "GuardedFn",
    "Inputs",
    "SessionFactory",
    "current_message",
]

logger = logging.getLogger("inboxguard.dramatiq")
#: Opens a new Session (or Connection) for one message.
SessionFactory = Callable[[], Session | Connection]
#: Errors a redelivery cannot cure (disposition ``refuse``): listed in every
#: guarded actor's ``throws``, so Retries dead-letters the message at once.
NEVER_RETRIED: tuple[type[Exception], ...] = (
    CommandRejectedError,
    InvalidCommandError,
    PayloadEncodingError,
)
#: Message option holding when a delayed message was due (epoch milliseconds):
#: Dramatiq drops ``eta`` when it moves the message to the work queue.
DUE_OPTION = "inbox_due_at"
#: The message the current worker thread is processing (set by the middleware).
current_message: ContextVar[MessageProxy | None] = ContextVar(
    "inboxguard_dramatiq_message", default=None
)


class Inputs:
    """What the guard is called with for one attempt."""

    __slots__ = ("command_id", "details", "payload", "sent_at")

    def __init__(
        self, command_id: str, payload: object, sent_at: dt.datetime | None, details: dict[str, Any]
    ) -> None:
        self.command_id = command_id
        self.payload = payload
        self.sent_at = sent_at
        self.details = details


class GuardCore:
    """The configuration of one guarded actor and the decisions shared by its
    sync and async wrappers: what the guard is called with, and what Dramatiq
    must do with a failed attempt."""

    #: The actor's own function (set by each wrapper): its signature binds
    #: the arguments that are digested.
    fn: Callable[..., Any]

    def __init__(
        self,
        *,
        inbox: InboxStore,
        broker: Broker,
        actor_name: str,
        consumer: str,
        get_id: Getter,
        exclude: tuple[str, ...],
        busy_delay: dt.timedelta,
        sent_time: SentTimeCheck,
    ) -> None:
        self.inbox = inbox
        self.sent_time = sent_time
        self.broker = broker
        self.actor_name = actor_name
        self.consumer = consumer
        self.get_id = get_id
        self.exclude = exclude
        self.busy_delay_ms = max(1, int(busy_delay.total_seconds() * 1000))

    @contextlib.contextmanager
    def delivering(self, message: MessageProxy) -> Iterator[None]:
        """Calls to the actor inside this block are the worker's delivery of
        ``message`` (its sent time and options are read), as the middleware
        would mark it; the testing kit uses it to replay a stamped message."""
        token = current_message.set(message)
        try:
            yield
        finally:
            current_message.reset(token)

    def message(self) -> MessageProxy | None:
        """The message being processed, or None for a direct call."""
        message = current_message.get()
        if message is not None and message.actor_name != self.actor_name:
            return None  # a direct call from inside another actor's body
        return message

    def inputs(
        self, message: MessageProxy | None, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Inputs:
        """The guard's arguments for this call (raises InvalidCommandError, or
        MissingSentTimeError when the actor requires a sent time the message
        lacks; a direct call has no message and needs none)."""
        command_id = command_id_of(self.get_id, args, kwargs)
        sent_at = _judged_from(message)
        return Inputs(
            command_id,
            payload_of(args, kwargs, self.fn),
            sent_at if message is None else self.sent_time(sent_at),
            self.details(message, args, kwargs),
        )

    def details(
        self, message: MessageProxy | None, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> dict[str, Any]:
        """What a quarantine record keeps about the delivery."""
        details: dict[str, Any] = {
            "framework": "dramatiq",
            "actor": self.actor_name,
            "args": list(args),
            "kwargs": dict(kwargs),
        }
        if message is not None:
            details["message_id"] = message.message_id
            details["queue"] = message.queue_name
            details["message_timestamp"] = message.message_timestamp
            details["options"] = {k: v for k, v in message.options.items() if k != "traceback"}
        return details

    # -- failures ---------------------------------------------------------------------------

    def on_failure(
        self,
        error: Exception,
        message: MessageProxy | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> tuple[Outcome, Retry, Refused | None]:
        """Map a failed attempt through the shared outcome policy.

        Returns the outcome, the ``Retry`` a retry raises, and, when a
        quarantine record must hold the delivery before Dramatiq may let it
        go (a refusal, or the last retry), the delivery to record; the caller
        records it (:func:`record_refusal`), feeds the answer to
        ``Outcome.recorded`` and raises :meth:`settle`'s exception. A direct
        call (no message) records nothing: its caller gets the error.
        """
        retry = Retry(str(error), delay=self._delay())
        outcome = outcome_of(
            error,
            last_attempt=lambda: message is not None and self._last_attempt(message, retry),
            failure_path_retries=True,
        )
        if message is None or not outcome.needs_record:
            return outcome, retry, None
        return outcome, retry, self.refused(message, args, kwargs, error)

    def refused(
        self,
        message: MessageProxy,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        error: Exception,
    ) -> Refused:
        """The delivery as its quarantine record keeps it."""
        command_id: str | None
        try:
            command_id = command_id_of(self.get_id, args, kwargs)
        except InvalidCommandError:
            command_id = None
        return Refused(
            consumer=self.consumer,
            command_id=command_id,
            message_id=message.message_id,
            payload=payload_of(args, kwargs, self.fn),
            exclude=self.exclude,
            details=self.details(message, args, kwargs),
        )

    @staticmethod
    def reason(outcome: Outcome) -> str | None:
        """The quarantine reason the adapter writes (None: the error's own)."""
        return QuarantineReason.RETRIES_EXHAUSTED if outcome.exhausted else None

    def settle(
        self, error: Exception, outcome: Outcome, retry: Retry, message: MessageProxy | None
    ) -> Exception:
        """The exception this attempt raises: ``error`` for a refusal (listed in
        ``throws``: dead-lettered) or a failure (Dramatiq's retry policy),
        ``retry`` otherwise. A delivery no quarantine record holds gets one
        more attempt, even past ``max_retries``."""
        if outcome.requeued:
            log_requeued(logger, error, f"actor {self.actor_name}")
            if message is not None:
                _one_more_attempt(message, self._max_retries(message))
            return retry
        if outcome.refused:
            if message is not None:
                log_refusal(
                    logger,
                    error,
                    self.details(message, (), {}),
                    consumer=self.consumer,
                    done="quarantined, then failed as a declared error (dead-lettered)",
                )
            _throw_on_message(message, error, self.broker)
            return error
        if outcome.failed:
            return error
        if outcome.exhausted and message is not None:
            logger.error(
                "actor %s: gave up on message %s after its last retry: %r",
                self.actor_name,
                message.message_id,
                error,
            )
        return retry

    def _last_attempt(self, message: MessageProxy, retry: Retry) -> bool:
        """Whether Retries will dead-letter ``retry`` instead of retrying it
        (the same reading of the options as ``Retries.after_process_message``)."""
        try:
            retries = retries_of(self.broker)
            actor_options = self.broker.get_actor(message.actor_name).options
        except Exception:
            return False
        done = int(message.options.get("retries", 0))
        retry_when = actor_options.get("retry_when", retries.retry_when)
        if retry_when is not None:
            return not retry_when(done, retry)
        max_retries = self._max_retries(message)
        return max_retries is not None and done >= max_retries

    def _max_retries(self, message: MessageProxy) -> int | None:
        """The ``max_retries`` Retries applies to ``message`` (its own option,
        else the actor's, else the middleware's), None when unknown or unlimited."""
        try:
            retries = retries_of(self.broker)
            actor_options = self.broker.get_actor(message.actor_name).options
        except Exception:
            return None
        value = message.options.get(
            "max_retries", actor_options.get("max_retries", retries.max_retries)
        )
        return value if isinstance(value, int) else None

    def _delay(self) -> int:
        return int(self.busy_delay_ms * random.uniform(1.0, 1.5))  # noqa: S311 - jitter


class GuardedFn(GuardCore):
    """A synchronous actor function wrapped in the inbox guard.

    Begin, claim, run the body, store its result, commit; then return the
    result (or, for a duplicate, the stored one). A command the inbox refuses
    raises an error listed in the actor's ``throws``; a busy claim or a
    transient database error raises ``dramatiq.Retry``, and on its last
    retry the command is quarantined as ``retries_exhausted`` first.
    """

    def __init__(
        self, fn: Callable[..., Any], *, session_factory: SessionFactory, **config: Any
    ) -> None:
        super().__init__(**config)
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.session_factory = session_factory

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        message = self.message()
        try:
            return self._run(message, args, kwargs)
        except Exception as error:
            outcome, retry, refused = self.on_failure(error, message, args, kwargs)
            if refused is not None:
                written = record_refusal(self.inbox, error, refused, self.reason(outcome))
                outcome = outcome.recorded(written)
            raised = self.settle(error, outcome, retry, message)
            if raised is error:
                raise
            raise raised from error

    def _run(
        self, message: MessageProxy | None, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        given = self.inputs(message, args, kwargs)
        with (
            transaction(
                self.inbox, self.session_factory, self.consumer, given.command_id
            ) as session,
            self.inbox.guard(
                session,
                consumer=self.consumer,
                command_id=given.command_id,
                payload=given.payload,
                exclude=self.exclude,
                sent_at=given.sent_at,
                details=given.details,
            ) as entry,
        ):
            if entry.duplicate:
                log_duplicate(logger, self.consumer, given.command_id, f"actor {self.actor_name}:")
                return entry.result
            result = kept(
                entry, self.fn(*args, **kwargs), read=dramatiq_reads(self.broker, message)
            )
        faults.reach(faults.FaultPoint.BEFORE_ACK, given.command_id)
        return result


def _one_more_attempt(message: MessageProxy, max_retries: int | None) -> None:
    """Let Retries requeue this message even on its last attempt.

    Retries counts the attempts in ``options["retries"]``, so this one is
    not counted. On a first attempt there is nothing to take back: with
    ``max_retries=0`` the message's own ``max_retries`` is raised to 1
    instead (Retries reads the message's option before the actor's), or
    Retries would fail the message without a quarantine record.
    """
    done = int(message.options.get("retries", 0))
    if done > 0:
        message.options["retries"] = done - 1
    elif max_retries is not None and max_retries < 1:
        message.options["max_retries"] = 1


def _judged_from(message: MessageProxy | None) -> dt.datetime | None:
    """The time the message's age counts from: when it was sent, or when its
    ``delay`` made it due if that is later (never a retry's own delay)."""
    if message is None:
        return None
    if not message.message_timestamp:
        return None
    sent: dt.datetime = message.message_datetime
    eta = message.options.get(DUE_OPTION, message.options.get("eta"))
    if not isinstance(eta, int | float) or message.options.get("retries"):
        return sent
    return judged_from(sent, dt.datetime.fromtimestamp(eta / 1000, dt.UTC))


def _throw_on_message(message: MessageProxy | None, error: Exception, broker: Broker) -> None:
    """Make sure Retries dead-letters a refused message.

    An actor's ``throws`` already lists :data:`NEVER_RETRIED`, but a
    ``throws`` in the message's own options replaces the actor's, so extend
    that one too. A declared failure the outcome policy refuses
    (``ReconciliationRequiredError``) is in neither: its type is added.
    """
    if message is None:
        return
    throws = message.options.get("throws")
    if throws is None and isinstance(error, NEVER_RETRIED):
        return
    if throws is None:
        try:
            throws = broker.get_actor(message.actor_name).options.get("throws")
        except Exception:
            throws = None
    current = () if throws is None else throws if isinstance(throws, tuple) else (throws,)
    wanted = (*NEVER_RETRIED, type(error))
    message.options["throws"] = (*current, *(t for t in wanted if t not in current))
