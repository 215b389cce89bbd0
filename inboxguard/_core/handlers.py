"""The registry of guarded handlers: every adapter and ``Inbox.handler``
records each handler it guards here, on its inbox.

A registration holds a callable, not a snapshot: the facts are read from
the running configuration when they are asked for, so a setting changed
after the handler was declared (``app.conf.update(...)``) is the one shown.
Registrations live as long as their inbox (weakly keyed). Frameworks that
create their handlers lazily (Celery finalizes its app on first use) add a
*preparer* that makes them exist before an application is listed.

Imports the standard library only.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

from inboxguard._core.guarantee import HandlerFacts

__all__ = [
    "Registration",
    "add_preparer",
    "prepare",
    "register_handler",
    "registered_inboxes",
    "registrations",
]


@dataclass(frozen=True, slots=True)
class Registration:
    """One guarded handler: its key, the framework object it belongs to (a
    Celery app, a Dramatiq broker; None for a plain consumer) and how to read
    its facts now."""

    kind: str
    handler: str
    owner: object | None
    facts: Callable[[], HandlerFacts]

    @property
    def key(self) -> tuple[str, str, int]:
        """Registering the same handler of the same owner again replaces it."""
        return (self.kind, self.handler, id(self.owner))


_by_inbox: weakref.WeakKeyDictionary[object, dict[tuple[str, str, int], Registration]] = (
    weakref.WeakKeyDictionary()
)
_preparers: dict[str, Callable[[object], None]] = {}


def register_handler(inbox: object, registration: Registration) -> None:
    """Record ``registration`` on ``inbox`` (replacing an earlier one of the same key)."""
    _by_inbox.setdefault(inbox, {})[registration.key] = registration


def registrations(inbox: object) -> list[Registration]:
    """The handlers registered on ``inbox``, in registration order."""
    return list(_by_inbox.get(inbox, {}).values())


def registered_inboxes() -> list[object]:
    """Every live inbox that has a registered handler."""
    return list(_by_inbox.keys())


def add_preparer(name: str, preparer: Callable[[object], None]) -> None:
    """Install ``preparer(app)``, called before ``app``'s handlers are listed
    (idempotent per ``name``); it must ignore objects it does not know."""
    _preparers[name] = preparer


def prepare(app: object) -> None:
    """Run every preparer on ``app``."""
    for preparer in list(_preparers.values()):
        preparer(app)
