"""The guarded Celery task: begin, claim, run, store, commit, and only then ack."""

from __future__ import annotations

import datetime as dt
import inspect
import logging
import random
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from celery import Task
from celery.exceptions import Ignore, Reject, Retry, SoftTimeLimitExceeded

from inboxguard import InboxStore, QuarantineReason
from inboxguard._core import faults, headers
from inboxguard._core.extract import CommandIdSpec, Getter, command_id_getter, payload_of
from inboxguard._core.guarantee import Guarantee
from inboxguard.adapters._evidence import Refused, command_id_of, record_refusal
from inboxguard.adapters._outcome import (
    Outcome,
    log_duplicate,
    log_refusal,
    log_requeued,
    out_of_attempts,
    outcome_of,
)
from inboxguard.adapters._results import celery_reads, kept
from inboxguard.adapters._sent_time import SentTimeCheck
from inboxguard.adapters._stores import transaction
from inboxguard.adapters.celery._guarantee import register_task
from inboxguard.adapters.celery._message import delivery_details, judged_from_request
from inboxguard.adapters.celery._options import (
    ACCEPT_EARLY_ACK_OPTION,
    REQUIRE_SENT_AT_OPTION,
    check_declared,
    task_function,
)
from inboxguard.adapters.celery._quiet import logged
from inboxguard.errors import ConfigurationError, InboxGuardError

__all__ = ["SENT_AT_HEADER", "InboxTask"]

logger = logging.getLogger("inboxguard.celery")

#: Message header holding the ISO-8601 UTC time the task was first published
#: (``x-inbox-sent-at``).
SENT_AT_HEADER = headers.SENT_AT
#: First backoff step (seconds) of a retry after a busy claim or a transient error.
DEFAULT_RETRY_BASE = 1.0
_CONTROL_FLOW = (Retry, Ignore, Reject)


class InboxTask(Task):  # type: ignore[misc]
    """A Celery task whose body runs at most once per business command.

    The body runs inside a database transaction that also records the
    command's ID and payload digest; the message is acked only after that
    transaction commits (``acks_late``). A duplicate delivery returns the
    stored result without running the body (``None`` for a task with
    ``ignore_result``, whose result a worker's delivery does not store); a
    payload mismatch or a message
    older than the evidence horizon is quarantined and rejected without
    requeue (never retried); a busy claim or a transient database error is
    retried with jittered backoff, never acked and dropped; so is a soft time
    limit. A delivery is acked only once its command was applied, found to be
    a duplicate, or held by a quarantine record: when that record cannot be
    written, the delivery goes back to the broker. Celery's own failure and
    time-limit paths requeue or dead-letter instead of acking
    (``acks_on_failure_or_timeout=False``).

    Every guarded task is checked when it is declared and again at worker
    start: misspelled ``inbox_*`` options, a command ID naming no argument and
    a consumer name taken by another task raise ``ConfigurationError``, and
    so does a settlement setting the Celery settlement table does not know
    to be safe (``acks_late=False``, ``reject_on_worker_lost=False``,
    ``retry_on_worker_lost=True``, a failure ack) unless its ``inbox_accept_*``
    option accepts the loss.

    Configure it with task options (``@app.task(base=InboxTask, inbox=...,
    inbox_session_factory=..., inbox_command_id=...)``) or use
    :func:`inbox_task`, which fills them in.
    """

    #: Commit strictly precedes the ack; early acks would lose a message whose
    #: transaction rolls back (and make ``Reject`` a no-op).
    acks_late = True
    #: A killed child's message goes back to the queue: the inbox makes the
    #: redelivery a duplicate when the first attempt committed.
    reject_on_worker_lost = True
    #: A killed child's message is requeued, never re-sent as a retry: once
    #: ``max_retries`` is spent Celery would reject it past the adapter.
    retry_on_worker_lost = False
    #: A failed or timed-out delivery is never acked: a hard time limit
    #: requeues it, a failure dead-letters it (task-level, so the rest of the
    #: application keeps its own setting). Celery 5.5+ reads the two split
    #: settings below; older versions the combined one.
    acks_on_failure_or_timeout = False
    acks_on_failure = False
    acks_on_timeout = False
    #: The inbox the claims are recorded in.
    inbox: InboxStore | None = None
    #: Zero-argument callable returning a new SQLAlchemy ``Session``.
    inbox_session_factory: Callable[[], Any] | None = None
    #: The command ID: a callable over the task's arguments, or an argument name.
    inbox_command_id: CommandIdSpec | None = None
    #: The consumer name the evidence is filed under (default: the task name).
    inbox_consumer: str | None = None
    #: Payload keys left out of the digest (see ``inboxguard.digest_of``).
    inbox_exclude: Iterable[str] = ()
    #: Replay windows declared for this task (e.g. a dead-letter replay window),
    #: checked against the inbox horizon when the worker starts.
    inbox_replay_windows: Mapping[str, dt.timedelta] | None = None
    #: First step of the busy/transient retry backoff, in seconds.
    inbox_retry_base: float = DEFAULT_RETRY_BASE
    #: Cap of one backoff step, in seconds (Celery's own name and default).
    retry_backoff_max: int = 600
    #: Accept that Celery acks failed or timed-out deliveries (loses them):
    #: without it the worker refuses a task that turns those acks back on.
    inbox_accept_ack_on_failure: bool = False
    #: Accept ``acks_late=False`` (the message is acked before the commit).
    inbox_accept_early_ack: bool = False
    #: Accept ``reject_on_worker_lost=False`` (a killed child's message is acked).
    inbox_accept_ack_on_worker_lost: bool = False
    #: This task shares its consumer name with another task on purpose (both set it).
    inbox_shared_consumer: bool = False
    #: Refuse (quarantine as ``missing_sent_at``, dead-letter) a message with
    #: no ``x-inbox-sent-at`` header; otherwise the first one is logged.
    inbox_require_sent_at: bool = False
    #: What only you know of this task's guarantee table (``inboxguard.Guarantee``:
    #: the provider, ledger, terminal states); the rest is derived.
    inbox_guarantee: Guarantee | None = None
    _inbox_getter: Getter | None = None
    _inbox_user_fn: tuple[Callable[..., Any], int] | None = None
    _inbox_sent_time: SentTimeCheck | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Check a task made from a function (``@app.task(base=InboxTask, ...)``)."""
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("_decorated"):
            check_declared(cls)
            register_task(cls)

    @classmethod
    def on_bound(cls, app: Any) -> None:
        """Warn loudly when a loss the guarantee depends on was accepted."""
        if cls.acks_late is False and cls.inbox is not None:
            msg = (
                f"task {cls.name!r} uses the inbox with acks_late=False"
                f" ({ACCEPT_EARLY_ACK_OPTION}=True): the message is acked before the"
                " transaction commits, so a crash or rollback loses it"
            )
            logger.warning(msg)
            warnings.warn(msg, RuntimeWarning, stacklevel=2)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the body once per command, inside the inbox transaction."""
        if not self.request.called_directly:
            # The worker (or apply()) already pushed this delivery's request:
            # calling Task.__call__ would push a second one without headers.
            return self._guarded(args, kwargs)
        self.push_request(args=args, kwargs=kwargs)
        try:
            return self._guarded(args, kwargs)
        finally:
            self.pop_request()

    # -- the guarded run ---------------------------------------------------------------

    def _guarded(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        inbox, factory = self._require_setup()
        request = self.request  # read once: each read looks up Celery's request stack
        details = delivery_details(self.name, request, args, kwargs)
        command_id: str | None = None
        payload: Any = None
        try:
            command_id = self._command_id(args, kwargs)
            payload = self._payload(args, kwargs)
            with transaction(inbox, factory, self._consumer(), command_id) as session:
                result = self._claim_and_run(
                    inbox, session, command_id, payload, request, args, kwargs, details
                )
        except Exception as exc:
            # A plain function call (no worker, no apply()) gets the errors themselves.
            if not isinstance(exc, _CONTROL_FLOW) and not request.called_directly:
                if payload is None:  # the command ID failed first
                    payload = self._payload(args, kwargs)
                self._settle(exc, command_id, payload, details)
            raise
        faults.reach(faults.FaultPoint.BEFORE_ACK, command_id)
        return result

    def _settle(
        self,
        exc: Exception,
        command_id: str | None,
        payload: object,
        details: Mapping[str, Any],
    ) -> None:
        """Turn a failed delivery into Reject or Retry; return to let Celery fail it."""
        retries = self.request.retries
        outcome = outcome_of(
            exc,
            last_attempt=lambda: self._out_of_retries(retries),
            transient=(SoftTimeLimitExceeded,),
        )
        if outcome.needs_record:
            outcome = outcome.recorded(self._record(exc, outcome, command_id, payload, details))
        if outcome.requeued:
            log_requeued(logger, exc, f"task {self.name} ({self.request.id})")
            self._retry_later(exc, retries, beyond_limit=True)
        if outcome.refused:
            log_refusal(
                logger,
                exc,
                details,
                consumer=self._consumer(),
                command_id=command_id,
                done=_REJECTED,
            )
            raise logged(Reject(_reason(exc), requeue=False)) from exc
        if outcome.exhausted:
            msg = f"task {self.name!r} gave up after {retries} retries: {exc}"
            raise Reject(msg, requeue=False) from exc
        if outcome.retried:
            self._retry_later(exc, retries)
        # A handler's own error is recorded as such; an inboxguard error under its code.
        failed_as = None if isinstance(exc, InboxGuardError) else QuarantineReason.HANDLER_FAILED
        if outcome.failed and not self._record(
            exc, outcome, command_id, payload, details, failed_as
        ):
            # Celery's failure path rejects without requeue (acks_on_failure=False),
            # which drops the message on a broker without a dead-letter queue
            # (Redis): without its quarantine record it must go back instead.
            log_requeued(logger, exc, f"task {self.name} ({self.request.id})")
            self._retry_later(exc, retries, beyond_limit=True)

    def _record(
        self,
        exc: Exception,
        outcome: Outcome,
        command_id: str | None,
        payload: object,
        details: Mapping[str, Any],
        reason: str | None = None,
    ) -> bool:
        """Whether a quarantine record now holds this refused, exhausted or
        finally failed delivery."""
        inbox, _ = self._require_setup()
        refused = Refused(
            consumer=self._consumer(),
            command_id=command_id,
            message_id=self.request.id,
            payload=payload,
            exclude=tuple(self.inbox_exclude),
            details=details,
        )
        if outcome.exhausted:
            reason = QuarantineReason.RETRIES_EXHAUSTED
        return record_refusal(inbox, exc, refused, reason)

    def _out_of_retries(self, retries: int) -> bool:
        limit = None if self.max_retries is None else self.max_retries + 1
        return out_of_attempts(retries + 1, limit)

    def _claim_and_run(
        self,
        inbox: InboxStore,
        session: Any,
        command_id: Any,
        payload: Any,
        request: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        details: Mapping[str, Any],
    ) -> Any:
        with inbox.guard(
            session,
            consumer=self._consumer(),
            command_id=command_id,
            payload=payload,
            exclude=tuple(self.inbox_exclude),
            sent_at=self._sent_at(request),
            details=details,
        ) as entry:
            if entry.duplicate:
                log_duplicate(logger, self._consumer(), command_id, f"task {self.name}:")
                return entry.result
            return kept(entry, self.run(*args, **kwargs), read=celery_reads(self, request))

    def _sent_at(self, request: Any) -> dt.datetime | None:
        """The time this delivery (``request``) counts its age from; a message
        without one is logged once or refused (``inbox_require_sent_at``); a
        direct call needs none."""
        sent_at = judged_from_request(request, self.name)
        return sent_at if request.called_directly else self._sent_time()(sent_at)

    def _sent_time(self) -> SentTimeCheck:
        """This task's rule for a message with no sent time (made once)."""
        if self._inbox_sent_time is None:
            self._inbox_sent_time = SentTimeCheck(
                self._consumer(),
                require=self.inbox_require_sent_at,
                stamp=_STAMP,
                option=REQUIRE_SENT_AT_OPTION,
                logger=logger,
            )
        return self._inbox_sent_time

    def _retry_later(self, exc: Exception, retries: int, *, beyond_limit: bool = False) -> None:
        """Publish the retry copy (then Celery acks this delivery); ``beyond_limit``
        sends it back even when ``max_retries`` is spent (its record is missing)."""
        cap = max(float(self.retry_backoff_max), self.inbox_retry_base)
        countdown = random.uniform(0, min(cap, self.inbox_retry_base * 2**retries))  # noqa: S311
        if beyond_limit:
            countdown = max(countdown, min(cap, self.inbox_retry_base))
        logger.warning(
            "task %s: %s; retrying in %.1fs (retry %d)", self.name, exc, countdown, retries + 1
        )
        limit = {"max_retries": retries + 1} if beyond_limit else {}
        raise self.retry(exc=Exception(_reason(exc)), countdown=countdown, **limit)

    # -- configuration -----------------------------------------------------------------

    def _require_setup(self) -> tuple[InboxStore, Callable[[], Any]]:
        factory = _option(self, "inbox_session_factory")
        if self.inbox is None or factory is None:
            msg = (
                f"task {self.name!r} uses InboxTask without inbox= and inbox_session_factory=;"
                " pass them as task options or use inboxguard.adapters.celery.inbox_task"
            )
            raise ConfigurationError(msg)
        return self.inbox, factory

    def _consumer(self) -> str:
        return self.inbox_consumer or str(self.name)

    def _command_id(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
        """The command ID (raises InvalidCommandError when it cannot be computed)."""
        getter = self._inbox_getter
        if getter is None:
            spec = _option(self, "inbox_command_id")
            if spec is None:
                msg = f"task {self.name!r} uses InboxTask without inbox_command_id="
                raise ConfigurationError(msg)
            fn, skip = self._user_fn()
            getter = command_id_getter(spec, fn, skip=skip)
            self._inbox_getter = getter
        return command_id_of(getter, args, kwargs)

    def _payload(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        """The call's payload, bound to the user's function (one call, one digest)."""
        fn, skip = self._user_fn()
        return payload_of(args, kwargs, fn, skip=skip)

    def _user_fn(self) -> tuple[Callable[..., Any], int]:
        """The user's function and how many of its leading parameters are not
        task arguments (see :func:`task_function`), read on first use like the
        command ID getter made from it, so every delivery binds the same one."""
        found = self._inbox_user_fn
        if found is None:
            fn, skip = task_function(self)
            found = self._inbox_user_fn = (fn, skip) if fn is not None else (self.run, 0)
        return found


#: What the worker does with a refused delivery, as its log line says.
_REJECTED = "quarantined, then rejected without requeue (dead-lettered)"

_STAMP = (
    "publish the task from a process that imports inboxguard.adapters.celery (its"
    " before_task_publish receiver stamps x-inbox-sent-at), or set that header (ISO 8601)"
)


def _reason(exc: BaseException) -> str:
    # The prefork pool pickles Reject/Retry back to the parent process;
    # inboxguard's errors take keyword-only arguments and do not unpickle, so
    # the framework gets their text.
    return f"{type(exc).__name__}: {exc}"


def _option(task: InboxTask, name: str) -> Any:
    """A task option as given: a function stored on the class must not become a method."""
    value = inspect.getattr_static(task, name, None)
    return value.__func__ if isinstance(value, staticmethod) else value
