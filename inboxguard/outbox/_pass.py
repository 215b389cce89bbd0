"""What one dispatch pass handles: the message sent for a claimed row, and the
outcome records written back once the pass is over."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from inboxguard.outbox._records import (
    HEADER_COMMAND_ID,
    HEADER_DIGEST,
    HEADER_SENT_AT,
    OutboxMessage,
)

__all__ = ["Outcome", "message_of", "receipt_json"]


@dataclass(slots=True)
class Outcome:
    """The parameters of the outcome records of one pass, one list per record."""

    delivered: list[dict[str, Any]]
    failed: list[dict[str, Any]]
    dead: list[dict[str, Any]]
    released: list[dict[str, Any]]


def message_of(row: Sequence[Any]) -> OutboxMessage:
    """The message a claimed row is sent as: its headers plus the command ID,
    digest and creation time the dispatcher sets from the row itself."""
    _, command_id, destination, payload, headers, digest, created_at, attempt = row
    merged = dict(json.loads(headers)) if headers else {}
    merged[HEADER_COMMAND_ID] = command_id
    merged[HEADER_DIGEST] = digest
    merged[HEADER_SENT_AT] = created_at.isoformat()
    return OutboxMessage(
        command_id=command_id,
        destination=destination,
        payload=json.loads(payload),
        headers=merged,
        digest=digest,
        created_at=created_at,
        attempt=attempt,
    )


def receipt_json(receipt: Any) -> str | None:
    """A transport's receipt as stored JSON (unknown types use repr)."""
    if receipt is None:
        return None
    return json.dumps(receipt, default=repr, sort_keys=True, ensure_ascii=False)
