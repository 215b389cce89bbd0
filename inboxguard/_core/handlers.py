"""The registry of guarded handlers: every adapter and ``Inbox.handler``
records each handler it guards here, on its inbox, with a way to read its
:class:`HandlerFacts` (its acks, replay windows, retry horizon, command-ID
source), which :mod:`inboxguard.guarantees` turns into a table.

A registration holds a callable, not a snapshot: the facts are read from
the running configuration when they are asked for, so a setting changed
after the handler was declared (``app.conf.update(...)``) is the one shown.
Registrations live as long as their inbox. Frameworks that
create their handlers lazily (Celery finalizes its app on first use) add a
*preparer* that makes them exist before an application is listed.

Imports the standard library only.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inboxguard._core.guarantee import Guarantee, GuaranteeFact, Setting
from inboxguard._core.retention import Window

__all__ = [
    "HandlerFacts",
    "Registration",
    "add_preparer",
    "describe_command_id",
    "prepare",
    "register_handler",
    "registered_inboxes",
    "registrations",
]


@dataclass(frozen=True, kw_only=True)
class HandlerFacts:
    """What an adapter reports about one guarded handler, read from the
    running configuration at the time it is asked.

    ``early_acks`` lists (setting, why) pairs for settings that ack a
    delivery before its transaction committed; ``module_path_consumer``
    names the setting to set when the consumer name comes from a module path.
    ``settled_by`` is what the worker does once the transaction committed
    (the ack; a Kafka consumer's offset commit) and ``redelivered`` how an
    unsettled delivery comes back, when the adapter knows it.
    """

    kind: str
    handler: str
    consumer: str
    inbox: Any
    declared: Guarantee | None
    identity: Mapping[str, Setting]
    delivery: GuaranteeFact
    windows: Sequence[Window] = ()
    retry_horizon: Window | None = None
    early_acks: Sequence[tuple[str, str]] = ()
    module_path_consumer: str | None = None
    settled_by: str = "the ack"
    redelivered: str | None = None


def describe_command_id(spec: object) -> str:
    """A stable description of a command-ID spec: an argument or key name, or
    the dotted name of a callable."""
    if spec is None:
        return "header x-inbox-command-id"
    if isinstance(spec, str):
        return f"argument {spec!r}"
    fn = getattr(spec, "fn", None)
    if fn is not None and callable(fn):  # a from_message() marker
        return f"message callable {_dotted(fn)}"
    if callable(spec):
        return f"callable {_dotted(spec)}"
    return repr(spec)


def _dotted(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or "?"
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}.{name}"


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


#: The attribute of an inbox holding its registrations. They live *on* the
#: inbox (and reference it back through their closures): a plain cycle that
#: the garbage collector frees with the inbox. A global map holding them
#: would keep every inbox, its engine and its pooled connections alive.
_ATTRIBUTE = "_inboxguard_guarded_handlers"
#: Every live inbox with a registered handler (weakly).
_inboxes: weakref.WeakSet[object] = weakref.WeakSet()
_preparers: dict[str, Callable[[object], None]] = {}


def register_handler(inbox: object, registration: Registration) -> None:
    """Record ``registration`` on ``inbox`` (replacing an earlier one of the same key)."""
    table = vars(inbox).setdefault(_ATTRIBUTE, {})
    table[registration.key] = registration
    _inboxes.add(inbox)


def registrations(inbox: object) -> list[Registration]:
    """The handlers registered on ``inbox``, in registration order."""
    return list(getattr(inbox, "__dict__", {}).get(_ATTRIBUTE, {}).values())


def registered_inboxes() -> list[object]:
    """Every live inbox that has a registered handler."""
    return list(_inboxes)


def add_preparer(name: str, preparer: Callable[[object], None]) -> None:
    """Install ``preparer(app)``, called before ``app``'s handlers are listed
    (idempotent per ``name``); it must ignore objects it does not know."""
    _preparers[name] = preparer


def prepare(app: object) -> None:
    """Run every preparer on ``app``."""
    for preparer in list(_preparers.values()):
        preparer(app)
