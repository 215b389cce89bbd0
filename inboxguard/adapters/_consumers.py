"""One consumer name, one handler: the registry every adapter declares through.

Evidence is filed under (consumer, command ID). Two different handlers under
one consumer name share that evidence, so the second handler's commands are
skipped as the first one's duplicates and get its stored result. A
declaration that would do this is refused, unless both handlers say they
share the name on purpose.

Imports no framework.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from inboxguard import InboxStore
from inboxguard.errors import ConfigurationError

__all__ = ["claim_consumer"]


@dataclass(frozen=True, slots=True)
class _Owner:
    handler: str
    shared: bool


_owners: weakref.WeakKeyDictionary[InboxStore, dict[str, dict[str, _Owner]]] = (
    weakref.WeakKeyDictionary()
)


def claim_consumer(
    inbox: InboxStore, consumer: str, handler: str, *, shared: bool, option: str
) -> None:
    """Declare ``handler`` (a task, actor or function name) under ``consumer``.

    Declaring the same handler again is harmless (a module imported twice).

    Raises:
        ConfigurationError: another handler already uses ``consumer`` on this
            inbox and not both of them set ``option`` (the adapter's name for
            "shared on purpose").
    """
    handlers = _owners.setdefault(inbox, {}).setdefault(consumer, {})
    others = [name for name, owner in handlers.items() if name != handler]
    clash = [name for name in others if not (shared and handlers[name].shared)]
    if clash:
        msg = (
            f"consumer {consumer!r} is already used by {clash[0]!r}; {handler!r} would share"
            " its evidence, so each one's commands would be skipped as the other's duplicates"
            f" and return its stored result; give {handler!r} a consumer name of its own, or"
            f" set {option}=True on both if they handle the same commands on purpose"
        )
        raise ConfigurationError(msg)
    handlers[handler] = _Owner(handler, shared)
