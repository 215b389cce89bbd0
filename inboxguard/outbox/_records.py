"""What the outbox hands to transports and to operators."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from inboxguard._core import headers as _headers

__all__ = [
    "HEADER_COMMAND_ID",
    "HEADER_DIGEST",
    "HEADER_SENT_AT",
    "CompactionResult",
    "OutboxMessage",
    "OutboxRow",
    "OutboxStatus",
    "Transport",
]

#: Header carrying the business command ID the receiving inbox deduplicates on.
HEADER_COMMAND_ID = _headers.COMMAND_ID
#: Header carrying the payload digest stored with the outbox row.
HEADER_DIGEST = _headers.DIGEST
#: Header carrying when the command was committed (ISO 8601, UTC); a consumer
#: passes it as ``sent_at`` to refuse replays older than its evidence.
HEADER_SENT_AT = _headers.SENT_AT


@dataclass(frozen=True, slots=True)
class OutboxMessage:
    """One command as the dispatcher hands it to a transport.

    ``headers`` holds the caller's headers plus :data:`HEADER_COMMAND_ID`,
    :data:`HEADER_DIGEST` and :data:`HEADER_SENT_AT`. A transport must send
    ``command_id`` as the message's id or idempotency key, so that a resend
    after a crash is recognised by the receiving inbox.
    """

    command_id: str
    destination: str
    payload: Any
    headers: Mapping[str, Any]
    digest: str
    created_at: dt.datetime
    attempt: int = 1


#: Sends one message; returns a JSON-encodable receipt (or None) once the
#: broker has it. Raising means "not delivered": the row is retried later.
Transport = Callable[[OutboxMessage], Any]


@dataclass(frozen=True, slots=True)
class OutboxStatus:
    """Health of the outbox at one instant.

    ``backlog`` counts rows not yet delivered (waiting, backing off or being
    sent); ``oldest_unsent_age`` is the age of the oldest of them (zero when
    there is none); ``dead`` counts rows that exhausted their attempts.
    """

    backlog: int
    oldest_unsent_age: dt.timedelta
    dead: int
    delivered: int = 0


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """A stored outbox row, for operators (dead rows, inspection)."""

    command_id: str
    destination: str
    digest: str
    created_at: dt.datetime
    attempts: int
    due_at: dt.datetime | None
    delivered_at: dt.datetime | None
    dead_at: dt.datetime | None
    last_error: str | None
    receipt: Any = None
    payload: Any = None
    headers: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What :meth:`Outbox.compact` did: payloads dropped, rows removed."""

    compacted: int
    purged: int
