"""The replay windows an application's workers discover, found from the
command line: ``--app`` names a Celery app, a Dramatiq broker or an Inbox.

The adapter of the framework is loaded only when the object is one of its
apps (by module name, so the command line imports no framework of its own):
the windows are the ones the worker's start-up check computes, with where
each was read, not only those declared on the policy.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from inboxguard import InboxStore
from inboxguard._core.retention import Window
from inboxguard.errors import ConfigurationError
from inboxguard.inbox import SqlInboxStore, is_inbox_store, is_sql_store

__all__ = ["DEFAULT_APP_ATTRS", "Discovery", "Found", "discover"]

#: Attributes a bare ``--app module`` is searched for, in order.
DEFAULT_APP_ATTRS = ("app", "celery", "broker", "inbox")


@dataclass(frozen=True, slots=True)
class Found:
    """The windows through which one guarded handler's messages come back."""

    handler: str
    inbox: InboxStore
    windows: tuple[Window, ...]


@dataclass(frozen=True, slots=True)
class Discovery:
    """What ``--app`` holds: its framework, each guarded handler's windows,
    and the framework's own start-up check (raises what a worker would)."""

    framework: str
    found: tuple[Found, ...]
    startup_check: Callable[[], None]
    #: ``(status, detail)`` of each guarded queue's dead-letter route (Celery on RabbitMQ).
    dead_letters: Callable[[], list[tuple[str, str]]] = list

    @property
    def inboxes(self) -> list[InboxStore]:
        """Each distinct inbox of the application."""
        unique: dict[int, InboxStore] = {}
        for item in self.found:
            unique.setdefault(id(item.inbox), item.inbox)
        return list(unique.values())

    @property
    def sql_inboxes(self) -> list[SqlInboxStore]:
        """Each distinct inbox whose evidence lives in a database's tables."""
        return [inbox for inbox in self.inboxes if is_sql_store(inbox)]


def discover(obj: Any, spec: str) -> Discovery:
    """Identify ``obj`` and compute its windows as its workers would.

    Raises:
        ConfigurationError: ``obj`` is none of a Celery app, a Dramatiq
            broker with an InboxMiddleware, or an Inbox; or the adapter's
            discovery refuses the configuration.
    """
    if is_inbox_store(obj):
        return Discovery("inbox", (Found("(declared)", obj, ()),), obj.check_schema)
    top = type(obj).__module__.split(".")[0]
    if top == "celery" and hasattr(obj, "tasks"):
        return _celery(obj)
    if top == "dramatiq" and hasattr(obj, "middleware"):
        return _dramatiq(obj, spec)
    msg = (
        f"--app {spec!r} is a {type(obj).__name__}; name a Celery app, a Dramatiq broker"
        " (with an InboxMiddleware) or an Inbox"
    )
    raise ConfigurationError(msg)


def _celery(app: Any) -> Discovery:
    adapter = importlib.import_module("inboxguard.adapters.celery")
    try:
        app.loader.import_default_modules()  # the modules of `include` and `imports`
    except Exception as error:
        msg = f"--app: the Celery app's task modules cannot be imported: {error}"
        raise ConfigurationError(msg) from error
    found = tuple(
        Found(
            item.task,
            item.inbox,
            item.as_windows(),
        )
        for item in adapter.replay_windows(app)
    )
    return Discovery(
        "celery",
        found,
        lambda: adapter.check_worker(app),
        lambda: adapter.dead_letter_findings(app),
    )


def _dramatiq(broker: Any, spec: str) -> Discovery:
    middlewares = [m for m in broker.middleware if type(m).__name__ == "InboxMiddleware"]
    if not middlewares:
        msg = f"--app {spec!r}: the Dramatiq broker has no InboxMiddleware, so nothing is guarded"
        raise ConfigurationError(msg)
    found: list[Found] = []
    for middleware in middlewares:
        windows = tuple(middleware.replay_windows(broker))
        names = ", ".join(sorted(middleware.guarded)) or "(no guarded actor)"
        found.append(Found(names, middleware.inbox, windows))

    def check() -> None:
        for middleware in middlewares:
            middleware.check_alignment(broker)
            if middleware.guarded:
                middleware.inbox.check_schema()

    return Discovery("dramatiq", tuple(found), check)
