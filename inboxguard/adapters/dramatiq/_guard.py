"""The guarded actor function: one transaction around claim, body and result.

The middleware replaces a guarded actor's ``fn`` with a :class:`GuardedFn`
(or, for an ``async def`` actor, the coroutine function of
``_async_guard``), so the transaction lives inside the actor call itself.
Nothing on this path depends on a middleware hook whose failure Dramatiq
would log and swallow: every outcome is the actor's return value or the
exception it raises. :class:`GuardCore` holds what both flavours share: what
the delivery script reads off a call, its rules, and how its settlement is
said with the Dramatiq verbs (``_settle``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from dramatiq import Broker
from dramatiq.broker import MessageProxy
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from inboxguard import InboxStore
from inboxguard._core import faults
from inboxguard._core.extract import Getter, payload_of
from inboxguard.adapters._delivery import judged_from
from inboxguard.adapters._drive import drive
from inboxguard.adapters._evidence import Refused, record_refusal
from inboxguard.adapters._outcome import log_duplicate
from inboxguard.adapters._results import dramatiq_reads, kept
from inboxguard.adapters._script import Reading, Record, Rules, Run, Settlement, deliver
from inboxguard.adapters._sent_time import SentTimeCheck
from inboxguard.adapters._stores import transaction
from inboxguard.adapters.dramatiq._settle import NEVER_RETRIED, VERBS, Call

__all__ = [
    "DUE_OPTION",
    "NEVER_RETRIED",
    "GuardCore",
    "GuardedFn",
    "SessionFactory",
    "current_message",
]

logger = logging.getLogger("inboxguard.dramatiq")
#: Opens a new Session (or Connection) for one message.
SessionFactory = Callable[[], Session | Connection]
#: Message option holding when a delayed message was due (epoch milliseconds):
#: Dramatiq drops ``eta`` when it moves the message to the work queue.
DUE_OPTION = "inbox_due_at"
#: The message the current worker thread is processing (set by the middleware).
current_message: ContextVar[MessageProxy | None] = ContextVar(
    "inboxguard_dramatiq_message", default=None
)


class GuardCore:
    """The configuration of one guarded actor and what its sync and async
    wrappers share: what the delivery script reads off a call, its rules, and
    the exception a settled attempt raises."""

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
        #: A failure goes to Retries, which retries it (see ``outcome_of``).
        self.rules = Rules(sent_time, failure_path_retries=True)

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

    def new_call(self) -> Call:
        """This call of the actor (its message, or none for a direct call)."""
        return Call(self.message(), self.broker, self.actor_name, self.busy_delay_ms)

    def reading(self, call: Call, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Reading:
        """What the delivery script reads off this call: the command ID, the
        sent time (a direct call has no message, needs none and records
        nothing), the payload bound to the actor's signature, the details."""
        message = call.message
        return Reading(
            Refused(
                consumer=self.consumer,
                command_id=None,
                message_id=None if message is None else message.message_id,
                payload=payload_of(args, kwargs, self.fn),
                exclude=self.exclude,
                details=self.details(message, args, kwargs),
            ),
            command_id=lambda: self.get_id(args, kwargs),
            sent_at=lambda: _judged_from(message),
            last_attempt=call.last_attempt,
            direct=message is None,
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

    def settle(self, call: Call, settled: Settlement) -> Exception | None:
        """What this attempt raises (None: it returns), by the Dramatiq verbs."""
        if settled.error is None:
            return VERBS[settled.step](call, settled, {})
        return VERBS[settled.step](call, settled, self.details(call.message, (), {}))


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
        call = self.new_call()
        result: list[Any] = []

        def run(given: Run) -> None:
            result.append(self._run(given, call.message, args, kwargs))

        settled = drive(deliver(self.reading(call, args, kwargs), self.rules), run, self._record)
        raised = self.settle(call, settled)
        if raised is None:
            return result[0]
        if raised is settled.error:
            raise raised
        raise raised from settled.error

    def _record(self, request: Record) -> bool:
        return record_refusal(self.inbox, request.error, request.refused, request.reason)

    def _run(
        self,
        given: Run,
        message: MessageProxy | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
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
