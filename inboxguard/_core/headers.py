"""Every message header inboxguard writes or reads, in one vocabulary.

All names share the ``x-inbox-`` prefix. The outbox stamps the first three on
each message it relays; the Celery adapter stamps the sent time on each task
it publishes; the kombu and aio-pika consumers add the attempt and retry-at
headers to the copy they publish for a retry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ATTEMPT",
    "COMMAND_ID",
    "DIGEST",
    "RETRY_AT",
    "SENT_AT",
    "is_reserved",
    "sent_at_of",
]

#: The business command ID the receiving inbox deduplicates on.
COMMAND_ID = "x-inbox-command-id"
#: The payload digest stored with an outbox row.
DIGEST = "x-inbox-digest"
#: When the command was sent or committed (ISO 8601 UTC, or epoch seconds where
#: a consumer documents it); a consumer passes it as ``sent_at`` to refuse
#: replays older than its evidence.
SENT_AT = "x-inbox-sent-at"
#: Deliveries of one message through the retry path so far (the first is 1).
ATTEMPT = "x-inbox-attempt"
#: Epoch seconds before which a retried copy is not processed.
RETRY_AT = "x-inbox-retry-at"


def is_reserved(name: str) -> bool:
    """True for a header name of this vocabulary (any ``x-inbox`` name, in any
    case): only inboxguard sets it."""
    return name.lower().startswith("x-inbox")


def sent_at_of(headers: Mapping[str, Any] | None) -> Any:
    """The raw sent time in ``headers``, or None."""
    return (headers or {}).get(SENT_AT)
