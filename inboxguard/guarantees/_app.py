"""Which guarded handlers an application has.

An application is what ``--app module:object`` names: an
:class:`~inboxguard.Inbox` or :class:`~inboxguard.RedisInbox` (every handler
guarded by it), a Celery app, a Dramatiq broker or a FastStream broker (the
handlers declared on it), a module (everything of these among its globals), an object holding
any of them as attributes (a kombu ``ConsumerMixin`` worker), or a list of
any of these.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Iterable

from inboxguard._core.handlers import (
    HandlerFacts,
    Registration,
    prepare,
    registered_inboxes,
    registrations,
)
from inboxguard.errors import ConfigurationError
from inboxguard.inbox import is_inbox_store

__all__ = ["handlers_of"]

#: Frameworks that create guarded handlers lazily, and the adapter that knows
#: how to make them exist (it installs a preparer when imported). Loaded by
#: name, only when the application already imported the framework.
_LAZY_FRAMEWORKS = {
    "celery": "inboxguard.adapters.celery",
    "faststream": "inboxguard.adapters.faststream",
}


def handlers_of(app: object) -> list[HandlerFacts]:
    """The facts of every guarded handler of ``app``, sorted by consumer and handler.

    Raises:
        ConfigurationError: ``app`` has no guarded handler.
    """
    for framework, adapter in _LAZY_FRAMEWORKS.items():
        if framework in sys.modules:
            importlib.import_module(adapter)
    found: dict[tuple[str, str, int], Registration] = {}
    for item in _members(app):
        prepare(item)
        for registration in _registrations_of(item):
            found.setdefault(registration.key, registration)
    if not found:
        msg = (
            f"no guarded handler found in {_name(app)}: --app must name a Celery app, a"
            " Dramatiq or FastStream broker, an inboxguard.Inbox, a module that holds one,"
            " or an object or list holding them, whose handlers were declared when it was"
            " imported"
        )
        raise ConfigurationError(msg)
    facts = [registration.facts() for registration in found.values()]
    return sorted(facts, key=lambda f: (f.consumer, f.handler, f.kind))


def _members(app: object) -> list[object]:
    if isinstance(app, types.ModuleType):
        return [app, *(v for k, v in vars(app).items() if not k.startswith("__"))]
    if isinstance(app, list | tuple | set | frozenset):
        return [member for item in app for member in _members(item)]
    if is_inbox_store(app):
        return [app]
    attributes = getattr(app, "__dict__", None)
    values: Iterable[object] = attributes.values() if isinstance(attributes, dict) else ()
    return [app, *(v for v in values if is_inbox_store(v))]


def _registrations_of(item: object) -> list[Registration]:
    if is_inbox_store(item):
        return registrations(item)
    if isinstance(item, types.ModuleType):
        return []
    return [
        registration
        for inbox in registered_inboxes()
        for registration in registrations(inbox)
        if registration.owner is not None and registration.owner is item
    ]


def _name(app: object) -> str:
    if isinstance(app, types.ModuleType):
        return f"module {app.__name__}"
    return f"{type(app).__name__} {app!r}"[:200]
