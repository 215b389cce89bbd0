"""What a guarded Celery task's guarantee table is read from.

Each task is registered when it is declared (and again at worker start);
its facts are read when asked: the task's ``acks_late``,
``reject_on_worker_lost`` and ``acks_on_failure_or_timeout`` as Celery
resolved them (task options over ``task_*`` settings), the replay windows the
worker's start-up check discovers (``visibility_timeout`` from
``broker_transport_options``, the retry schedule, declared windows), the
command-ID spec and the consumer name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from celery import Celery

from inboxguard._core.guarantee import GuaranteeFact, Setting, check_declared_guarantee
from inboxguard._core.handlers import (
    HandlerFacts,
    Registration,
    add_preparer,
    describe_command_id,
    register_handler,
)
from inboxguard._core.retention import Window
from inboxguard.adapters.celery._options import task_function
from inboxguard.adapters.celery._settlement import CELERY_SETTLEMENT

__all__ = ["GUARANTEE_OPTION", "register_task", "use_window_source"]

#: Task option declaring what only the user knows (an ``inboxguard.Guarantee``).
GUARANTEE_OPTION = "inbox_guarantee"
_KIND = "celery task"


def _no_windows(app: Any) -> list[Any]:
    msg = "the Celery adapter's start-up module was not imported"
    raise RuntimeError(msg)


_window_source: Callable[[Any], Iterable[Any]] = _no_windows


def use_window_source(source: Callable[[Any], Iterable[Any]]) -> None:
    """Read replay windows with ``source`` (the start-up check's
    ``replay_windows``), so that the table and the worker's check agree."""
    global _window_source  # noqa: PLW0603 - set once, by the start-up module
    _window_source = source


def register_task(task: Any) -> None:
    """List a guarded task (a task class made by ``@app.task`` or an instance)
    in its inbox's registry of guarded handlers.

    Raises:
        ConfigurationError: its ``inbox_guarantee`` is not a Guarantee or
            declares a field derived here.
    """
    name = str(getattr(task, "name", None) or getattr(task, "__name__", "?"))
    check_declared_guarantee(
        _static(task, GUARANTEE_OPTION), f"task {name!r}", delivery_derived=True
    )
    inbox = getattr(task, "inbox", None)
    if inbox is None:
        return
    owner = vars(task).get("app") if isinstance(task, type) else task.app
    register_handler(inbox, Registration(_KIND, name, owner, lambda: _facts(task)))


def _live(task: Any) -> Any:
    """The task instance the app runs (a class registered at declaration)."""
    if not isinstance(task, type):
        return task
    app = vars(task).get("app")
    found = app.tasks.get(getattr(task, "name", None)) if app is not None else None
    return found if found is not None else task


def _facts(declared: Any) -> HandlerFacts:
    task = _live(declared)
    name = str(task.name)
    windows = [
        window
        for item in _window_source(task.app)
        if item.task == name
        for window in item.as_windows()
    ]
    retry = next((w for w in windows if w.name == "retry_schedule"), None)
    if retry is None and task.max_retries is None:
        retry = Window("retry_schedule", None, f"task {name}: max_retries=None")
    fn, _ = task_function(task)
    consumer = getattr(task, "inbox_consumer", None) or name
    exclude = ", ".join(getattr(task, "inbox_exclude", ()) or ()) or "none"
    return HandlerFacts(
        kind=_KIND,
        handler=name,
        consumer=consumer,
        inbox=task.inbox,
        declared=_static(task, GUARANTEE_OPTION),
        identity={
            "inbox_command_id": describe_command_id(_static(task, "inbox_command_id")),
            "inbox_exclude": exclude,
        },
        delivery=_delivery(task),
        windows=windows,
        retry_horizon=retry,
        early_acks=_early_acks(task),
        module_path_consumer=_module_path(task, fn, consumer),
    )


def _delivery(task: Any) -> GuaranteeFact:
    # Every setting of the settlement table, as the task resolved it.
    settings: dict[str, Setting] = {
        s.name: _setting(getattr(task, s.name, None)) for s in CELERY_SETTLEMENT.settings
    }
    settings["broker"] = _scheme(task.app)
    if not task.acks_late:
        text = (
            "at most once: acked before the transaction commits (acks_late=False), so a"
            " crash or rollback loses the command"
        )
    else:
        text = "at least once: acked only after the transaction commits (acks_late)"
        text += (
            "; a killed worker's message goes back to the queue (reject_on_worker_lost)"
            if task.reject_on_worker_lost
            else "; a killed worker's message is acked and lost (reject_on_worker_lost=False)"
        )
    return GuaranteeFact(text, settings=settings)


def _setting(value: object) -> Setting:
    """A settlement value as a guarantee-table setting (a bool stays a bool)."""
    return value if isinstance(value, str | int | float | bool) or value is None else repr(value)


def _early_acks(task: Any) -> list[tuple[str, str]]:
    """The settlement settings the Celery settlement table refuses (present
    only when the task accepted the loss with its ``inbox_accept_*`` option)."""
    found = []
    for setting in CELERY_SETTLEMENT.settings:
        value = getattr(task, setting.name, None)
        choice = setting.choice(value, {})
        if choice is None or choice.verdict == "refuses":
            why = choice.why if choice is not None else "not known to be safe"
            found.append(
                (setting.name, f"{setting.name}={value!r}: {why}; use {setting.safe_values()}")
            )
    return found


def _module_path(task: Any, fn: Any, consumer: str) -> str | None:
    if fn is None:
        return None
    module_path = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__name__', '')}"
    return "inbox_consumer" if consumer == module_path else None


def _scheme(app: Any) -> str:
    url = app.conf.broker_url or ""
    if isinstance(url, list | tuple):
        url = url[0] if url else ""
    scheme = str(url).partition("://")[0]
    return scheme or "unknown"


def _static(task: Any, name: str) -> Any:
    value = inspect.getattr_static(task, name, None)
    return value.__func__ if isinstance(value, staticmethod) else value


def _prepare(app: object) -> None:
    """Import the app's task modules and finalize it, as a worker does, so its
    guarded tasks exist (Celery creates them lazily)."""
    if isinstance(app, Celery):
        app.loader.import_default_modules()
        _ = app.tasks


add_preparer("celery", _prepare)
