"""The guarded Celery task: begin, claim, run, store, commit, and only then ack."""

from __future__ import annotations

import datetime as dt
import logging
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from celery import Task
from celery.exceptions import Ignore, Reject, Retry, SoftTimeLimitExceeded

from inboxguard import InboxStore
from inboxguard._core import faults, headers
from inboxguard._core.extract import CommandIdSpec, Getter, command_id_getter, payload_of
from inboxguard._core.guarantee import Guarantee
from inboxguard.adapters._drive import drive
from inboxguard.adapters._evidence import Refused, command_id_of, record_refusal
from inboxguard.adapters._outcome import log_duplicate, out_of_attempts
from inboxguard.adapters._results import celery_reads, kept
from inboxguard.adapters._script import Reading, Record, Rules, Run, deliver
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
from inboxguard.adapters.celery._settle import VERBS
from inboxguard.errors import ConfigurationError

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
    _inbox_rules: Rules | None = None

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
        request = self.request  # read once: each read looks up Celery's request stack
        if not request.called_directly:
            # The worker (or apply()) already pushed this delivery's request:
            # calling Task.__call__ would push a second one without headers.
            return self._guarded(request, args, kwargs)
        self.push_request(args=args, kwargs=kwargs)
        try:
            return self._guarded(self.request, args, kwargs)
        finally:
            self.pop_request()

    # -- the guarded run ---------------------------------------------------------------

    def _guarded(self, request: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """One delivery (``request``, this task's current one) through the
        delivery script, settled by the Celery verbs."""
        inbox, factory = self._require_setup()
        retries = request.retries
        # A plain function call (no worker, no apply()) gets the errors themselves.
        direct = bool(request.called_directly)
        details = delivery_details(self.name, request, args, kwargs)
        reading = Reading(
            Refused(
                consumer=self._consumer(),
                command_id=None,
                message_id=request.id,
                payload=self._payload(args, kwargs),
                exclude=tuple(self.inbox_exclude),
                details=details,
            ),
            command_id=lambda: self._command_id(args, kwargs),
            sent_at=lambda: judged_from_request(request, self.name),
            last_attempt=lambda _: self._out_of_retries(retries),
            direct=direct,
        )
        result: list[Any] = []

        def run(given: Run) -> None:
            with transaction(inbox, factory, self._consumer(), given.command_id) as session:
                result.append(self._claim_and_run(inbox, session, given, request, args, kwargs))

        settled = drive(deliver(reading, self._rules()), run, self._record, _CONTROL_FLOW)
        if settled.error is None:
            faults.reach(faults.FaultPoint.BEFORE_ACK, settled.command_id)
            return result[0]
        try:
            raise settled.error
        except Exception:
            if not direct:
                VERBS[settled.step](self, settled, retries)
            raise

    def _record(self, request: Record) -> bool:
        """Whether a quarantine record now holds this refused, exhausted or
        finally failed delivery."""
        inbox, _ = self._require_setup()
        return record_refusal(inbox, request.error, request.refused, request.reason)

    def _out_of_retries(self, retries: int) -> bool:
        limit = None if self.max_retries is None else self.max_retries + 1
        return out_of_attempts(retries + 1, limit)

    def _claim_and_run(
        self,
        inbox: InboxStore,
        session: Any,
        given: Run,
        request: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        with inbox.guard(
            session,
            consumer=self._consumer(),
            command_id=given.command_id,
            payload=given.payload,
            exclude=tuple(self.inbox_exclude),
            sent_at=given.sent_at,
            details=given.details,
        ) as entry:
            if entry.duplicate:
                log_duplicate(logger, self._consumer(), given.command_id, f"task {self.name}:")
                return entry.result
            return kept(entry, self.run(*args, **kwargs), read=celery_reads(self, request))

    def _rules(self) -> Rules:
        """This task's rules of the delivery script (made once): a failure is
        quarantined before Celery's failure path takes it, a soft time limit is
        retried like a transient error."""
        if self._inbox_rules is None:
            sent_time = SentTimeCheck(
                self._consumer(),
                require=self.inbox_require_sent_at,
                stamp=_STAMP,
                option=REQUIRE_SENT_AT_OPTION,
                logger=logger,
            )
            self._inbox_rules = Rules(
                sent_time, record_failures=True, transient=(SoftTimeLimitExceeded,)
            )
        return self._inbox_rules

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


_STAMP = (
    "publish the task from a process that imports inboxguard.adapters.celery (its"
    " before_task_publish receiver stamps x-inbox-sent-at), or set that header (ISO 8601)"
)


def _option(task: InboxTask, name: str) -> Any:
    """A task option as given: a function stored on the class must not become a method.

    Read as ``inspect.getattr_static`` finds a plain value (the instance, then
    each class of the MRO), without its descriptor checks: every delivery reads
    the session factory."""
    value = task.__dict__.get(name, _MISSING)
    if value is _MISSING:
        for klass in type(task).__mro__:
            found = klass.__dict__.get(name, _MISSING)
            if found is not _MISSING:
                value = found
                break
        else:
            return None
    return value.__func__ if isinstance(value, staticmethod) else value


_MISSING: Any = object()
