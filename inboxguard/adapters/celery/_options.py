"""The options of a guarded Celery task, checked at declaration and at worker start."""

from __future__ import annotations

import inspect
from typing import Any

from inboxguard._core.extract import command_id_getter
from inboxguard.adapters._consumers import claim_consumer
from inboxguard.adapters._stores import INBOX_KINDS, check_pairing, is_inbox
from inboxguard.adapters.celery._settlement import (
    ACCEPT_ACK_OPTION,
    ACCEPT_EARLY_ACK_OPTION,
    ACCEPT_LOST_ACK_OPTION,
    check_settlement,
)
from inboxguard.errors import ConfigurationError

__all__ = [
    "ACCEPT_ACK_OPTION",
    "ACCEPT_EARLY_ACK_OPTION",
    "ACCEPT_LOST_ACK_OPTION",
    "INBOX_OPTIONS",
    "SHARED_CONSUMER_OPTION",
    "check_acks",
    "check_declared",
    "task_function",
]

#: Task option saying two tasks share one consumer name on purpose.
SHARED_CONSUMER_OPTION = "inbox_shared_consumer"
#: Task option refusing a message with no sent time (quarantined, dead-lettered).
REQUIRE_SENT_AT_OPTION = "inbox_require_sent_at"
#: Every ``inbox_*`` option a guarded task accepts.
INBOX_OPTIONS = frozenset(
    {
        "inbox_session_factory",
        "inbox_command_id",
        "inbox_consumer",
        "inbox_exclude",
        "inbox_replay_windows",
        "inbox_retry_base",
        ACCEPT_ACK_OPTION,
        ACCEPT_EARLY_ACK_OPTION,
        ACCEPT_LOST_ACK_OPTION,
        SHARED_CONSUMER_OPTION,
        REQUIRE_SENT_AT_OPTION,
        "inbox_guarantee",
    }
)


def task_function(task: Any) -> tuple[Any, int]:
    """The user's function behind a task and how many leading parameters are
    not task arguments (1 for an unbound ``bind=True`` function).

    Autoretry replaces ``run`` on the task instance and keeps the original as
    ``_orig_run``, already as called (a function, or a bound method): nothing
    to skip. On the class, ``run`` is a staticmethod, or with ``bind=True`` a
    function whose first parameter is the task.
    """
    own = getattr(task, "__dict__", {}).get("_orig_run")
    if own is not None:
        return own, 0
    raw = inspect.getattr_static(task, "run", None)
    if isinstance(raw, staticmethod):
        return raw.__func__, 0
    if inspect.ismethod(raw):
        return raw, 0
    return raw, 1


def check_declared(task: Any) -> None:
    """Refuse a guarded task whose options cannot work.

    Checked when the task class is made (``@app.task(base=InboxTask, ...)``
    or :func:`inbox_task`) and again at worker start.

    Raises:
        ConfigurationError: an ``inbox_*`` option is misspelled, ``inbox`` is
            not an Inbox, ``inbox_session_factory`` is not callable,
            ``inbox_command_id`` is missing or names no argument, or the
            consumer name is another task's, or a settlement setting is not
            known to be safe (see ``check_acks``).
    """
    name = getattr(task, "name", None) or getattr(task, "__name__", "?")
    klass = task if isinstance(task, type) else type(task)
    own = {option for base in klass.__mro__ for option in vars(base)}
    typos = sorted(o for o in own if o.startswith("inbox_") and o not in INBOX_OPTIONS)
    if typos:
        msg = (
            f"task {name!r}: unknown option {', '.join(typos)}; the inbox options are"
            f" inbox=, {', '.join(sorted(INBOX_OPTIONS))}"
        )
        raise ConfigurationError(msg)
    inbox = getattr(task, "inbox", None)
    if not is_inbox(inbox):
        msg = f"task {name!r} uses InboxTask without inbox=<{INBOX_KINDS}>, got {inbox!r}"
        raise ConfigurationError(msg)
    factory = _static(task, "inbox_session_factory")
    if not callable(factory):
        msg = f"task {name!r}: inbox_session_factory must be a callable returning a Session"
        raise ConfigurationError(msg)
    check_pairing(inbox, factory, f"task {name!r}")
    spec = _static(task, "inbox_command_id")
    if spec is None:
        msg = f"task {name!r} uses InboxTask without inbox_command_id=<argument name or callable>"
        raise ConfigurationError(msg)
    fn, skip = task_function(task)
    if fn is not None:
        command_id_getter(spec, fn, skip=skip)
    consumer = getattr(task, "inbox_consumer", None) or str(name)
    shared = bool(getattr(task, SHARED_CONSUMER_OPTION, False))
    claim_consumer(inbox, consumer, str(name), shared=shared, option=SHARED_CONSUMER_OPTION)
    check_acks(task)


def check_acks(task: Any) -> None:
    """Refuse a guarded task whose settlement settings could lose a command.

    Reads the Celery settlement table (``CELERY_SETTLEMENT``): ``acks_late``
    and ``reject_on_worker_lost`` must be True, ``retry_on_worker_lost`` and
    the failure acks (``acks_on_failure_or_timeout``, ``acks_on_failure``,
    ``acks_on_timeout``) False; any other value is refused naming the safe
    ones.

    Raises:
        ConfigurationError: an unsafe value, unless the task accepts the loss
            explicitly: ``inbox_accept_early_ack=True`` (``acks_late=False``),
            ``inbox_accept_ack_on_worker_lost=True``
            (``reject_on_worker_lost=False``), ``inbox_accept_ack_on_failure=True``
            (the failure acks).
    """
    check_settlement(task)


def _static(task: Any, name: str) -> Any:
    """A task option as given: a function stored on the class must not become a method."""
    value = inspect.getattr_static(task, name, None)
    return value.__func__ if isinstance(value, staticmethod) else value
