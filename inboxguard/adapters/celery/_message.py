"""What the guarded Celery task reads from a delivery: its age, its details."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from typing import Any

from inboxguard._core import headers
from inboxguard.adapters._delivery import judged_from

__all__ = ["delivery_details", "judged_from_request"]

logger = logging.getLogger("inboxguard.celery")
#: Message header holding the ISO-8601 UTC time the task was first published.
SENT_AT_HEADER = headers.SENT_AT


def judged_from_request(request: Any, task_name: str) -> dt.datetime | None:
    """The time the message's age counts from: its first publish, or its
    ``eta``/``countdown`` when that is later (never a retry's own eta)."""
    sent = _sent_at(request, task_name)
    eta = getattr(request, "eta", None)
    if sent is None or not eta or int(getattr(request, "retries", 0) or 0):
        return sent
    try:
        due = eta if isinstance(eta, dt.datetime) else dt.datetime.fromisoformat(str(eta))
    except ValueError:
        return sent
    return judged_from(sent, due if due.utcoffset() is not None else due.replace(tzinfo=dt.UTC))


def _sent_at(request: Any, task_name: str) -> dt.datetime | None:
    raw = headers.sent_at_of(getattr(request, "headers", None))
    if raw is None:  # custom headers can also arrive as request attributes
        raw = getattr(request, headers.SENT_AT, None)
    if raw is None:
        return None
    try:
        value = dt.datetime.fromisoformat(str(raw))
    except ValueError:
        value = None
    if value is None or value.utcoffset() is None:
        logger.warning(
            "task %s: header %s=%r is not an aware ISO-8601 time; message age not checked",
            task_name,
            SENT_AT_HEADER,
            raw,
        )
        return None
    return value


def delivery_details(
    name: str, request: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """What an operator needs to inspect and replay the message."""
    return {
        "task": name,
        "task_id": getattr(request, "id", None),
        "args": list(args),
        "kwargs": dict(kwargs),
        "headers": dict(getattr(request, "headers", None) or {}),
        "delivery_info": dict(getattr(request, "delivery_info", None) or {}),
        "retries": getattr(request, "retries", 0),
    }
