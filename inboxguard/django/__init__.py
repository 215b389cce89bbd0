"""The Django store: the inbox and the outbox inside ``transaction.atomic()``.

Add ``"inboxguard.django"`` to ``INSTALLED_APPS``, set ``INBOXGUARD =
{"RETENTION": timedelta(...), "TABLE_PREFIX": ..., "DATABASE": "default"}``
and run ``manage.py migrate``; then::

    from inboxguard.django import inbox

    with transaction.atomic():
        with inbox.guard(consumer="billing", command_id=..., payload=...) as entry:
            ...

``inbox`` and ``outbox`` are built from the settings on first use;
:class:`DjangoInbox` and :class:`DjangoOutbox` build more (another database,
another prefix). Importing this package does not import Django.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inboxguard.django._store import DjangoInbox, DjangoOutbox, DjangoSession

__all__ = ["DjangoInbox", "DjangoOutbox", "DjangoSession", "inbox", "outbox"]

_CLASSES = ("DjangoInbox", "DjangoOutbox", "DjangoSession")
_lock = threading.Lock()
_built: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    """The classes, loaded on use; ``inbox`` and ``outbox``, built once from
    ``settings.INBOXGUARD`` on first use (a :class:`DjangoInbox` with its
    ``RETENTION``, ``TABLE_PREFIX`` and ``DATABASE``; a :class:`DjangoOutbox`
    with the prefix and database)."""
    if name in _CLASSES:
        from inboxguard.django import _store

        return getattr(_store, name)
    if name in ("inbox", "outbox"):
        with _lock:
            if name not in _built:
                from inboxguard.django import _store

                kind = _store.DjangoInbox if name == "inbox" else _store.DjangoOutbox
                _built[name] = kind()
            return _built[name]
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
