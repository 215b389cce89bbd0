"""Outbox transports for Celery, Dramatiq and kombu.

Each module imports its framework, so import the one you use
(``inboxguard.adapters.kombu.transport`` ...); ``import inboxguard`` never
pulls a framework in. Every transport sends the row's command ID as the
message's own id and in the ``x-inbox-command-id`` header, and the payload
digest in ``x-inbox-digest``; a transport that raises has not delivered.

The payload of a Celery or Dramatiq command is either ``{"args": [...],
"kwargs": {...}}`` (the shape the inbox adapters digest) or a plain mapping,
sent as keyword arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inboxguard.errors import PayloadEncodingError

__all__ = ["split_payload"]


def split_payload(payload: Any) -> tuple[list[Any], dict[str, Any]]:
    """Return ``(args, kwargs)`` for a task call built from an outbox payload.

    Raises:
        PayloadEncodingError: the payload is neither a mapping nor the
            ``{"args": [...], "kwargs": {...}}`` shape.
    """
    if isinstance(payload, Mapping):
        if set(payload) == {"args", "kwargs"} and isinstance(payload["args"], list):
            kwargs = payload["kwargs"]
            if isinstance(kwargs, Mapping):
                return list(payload["args"]), dict(kwargs)
        return [], dict(payload)
    msg = (
        f"a task payload must be a mapping (sent as keyword arguments) or"
        f' {{"args": [...], "kwargs": {{...}}}}, got {type(payload).__name__}'
    )
    raise PayloadEncodingError(msg, path="payload")
