"""``inbox_task``: the drop-in decorator that declares a Celery task guarded
by the inbox (the task class that runs it is :class:`InboxTask`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from celery import shared_task

from inboxguard import InboxStore
from inboxguard._core.extract import CommandIdSpec, command_id_getter
from inboxguard._core.guarantee import Guarantee
from inboxguard.adapters._stores import INBOX_KINDS, is_inbox
from inboxguard.adapters.celery._guarantee import GUARANTEE_OPTION
from inboxguard.adapters.celery._options import SHARED_CONSUMER_OPTION
from inboxguard.adapters.celery._task import InboxTask
from inboxguard.errors import ConfigurationError

__all__ = ["inbox_task"]


def inbox_task(
    inbox: InboxStore,
    *,
    session_factory: Callable[[], Any],
    command_id: CommandIdSpec,
    consumer: str | None = None,
    exclude: Iterable[str] = (),
    shared_consumer: bool = False,
    guarantee: Guarantee | None = None,
    **celery_options: Any,
) -> Callable[[Callable[..., Any]], Any]:
    """Return a ``shared_task`` decorator whose task runs once per command.

    ``command_id`` is a callable over the task's arguments or the name of one;
    the body reaches its session with ``inboxguard.current_session()``.
    ``consumer`` defaults to the task name: set it, so that renaming the task
    does not reopen commands it already processed. Other keyword arguments
    are Celery task options; ``acks_late=True`` and
    ``reject_on_worker_lost=True`` are the defaults. A ``base`` of your own is
    combined with :class:`InboxTask`. ``shared_consumer=True`` lets two tasks
    (both setting it) use one consumer name on purpose. ``guarantee``
    declares what only you know of the task's guarantee table (see
    :class:`inboxguard.Guarantee`); ``inboxguard guarantees`` derives the rest.

    Raises:
        ConfigurationError: ``inbox`` is not an Inbox, ``session_factory`` is
            not callable, ``command_id`` names no argument of the task, or
            the consumer name is another task's.
    """
    if not is_inbox(inbox):
        msg = f"inbox must be {INBOX_KINDS}, got {type(inbox).__name__}"
        raise ConfigurationError(msg)
    if not callable(session_factory):
        msg = "session_factory must be a callable returning a sqlalchemy Session"
        raise ConfigurationError(msg)
    base = celery_options.pop("base", None)
    if base is not None and not issubclass(base, InboxTask):
        base = type(f"Inbox{base.__name__}", (InboxTask, base), {})
    options: dict[str, Any] = {
        "base": base or InboxTask,
        "inbox": inbox,
        "inbox_session_factory": session_factory,
        "inbox_command_id": command_id,
        "inbox_consumer": consumer,
        "inbox_exclude": tuple(exclude),
        SHARED_CONSUMER_OPTION: shared_consumer,
        GUARANTEE_OPTION: guarantee,
        **celery_options,
    }

    def decorate(fn: Callable[..., Any]) -> Any:
        command_id_getter(command_id, fn, skip=1 if options.get("bind") else 0)
        return shared_task(**options)(fn)

    return decorate
