"""What one dispatch pass handles: the message sent for a claimed row, and the
outcome records written back once the pass is over."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from inboxguard._core.text import MAX_STORED_TEXT, escaped_text
from inboxguard.outbox._records import (
    HEADER_COMMAND_ID,
    HEADER_DIGEST,
    HEADER_SENT_AT,
    OutboxMessage,
)

__all__ = [
    "Outcome",
    "dead_record",
    "encoded_receipt",
    "exponential_backoff",
    "message_of",
    "receipt_json",
    "release_record",
]

logger = logging.getLogger("inboxguard.outbox")


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


def encoded_receipt(receipt: Any, command_id: str) -> str | None:
    """The receipt as stored JSON, escaped so that every database stores it; one
    that cannot be encoded, or is too long to store, is replaced by a note,
    because the broker already holds the message (it was delivered)."""
    try:
        text = receipt_json(receipt)
    except Exception as exc:
        logger.warning(
            "outbox row %s was delivered, but its receipt cannot be stored as JSON: %s",
            command_id,
            exc,
            extra={"command_id": command_id},
        )
        text = receipt_json({"unencodable_receipt": f"{type(exc).__name__}: {exc}"[:500]})
    if text is None:
        return None
    if len(text) > MAX_STORED_TEXT:
        logger.warning(
            "outbox row %s was delivered, but its receipt is too long to store (%d characters): %s",
            command_id,
            len(text),
            escaped_text(text),
            extra={"command_id": command_id},
        )
        return receipt_json({"receipt_too_long": len(text)})
    return escaped_text(text)


def dead_record(row: Sequence[Any], token: str, now: dt.datetime, error: str) -> dict[str, Any]:
    """The parameters that mark a claimed row dead."""
    return {"b_id": row[0], "b_token": token, "b_at": now, "b_error": error}


def release_record(row: Sequence[Any], token: str, due: dt.datetime) -> dict[str, Any]:
    """The parameters that hand a claimed, unsent row back, due at ``due``."""
    return {"b_id": row[0], "b_token": token, "b_due": due}


def exponential_backoff(
    base: dt.timedelta = dt.timedelta(seconds=1), cap: dt.timedelta = dt.timedelta(minutes=5)
) -> Callable[[int], dt.timedelta]:
    """Return ``attempt -> delay``: ``base * 2**(attempt-1)``, at most ``cap``."""

    def delay(attempt: int) -> dt.timedelta:
        grown: dt.timedelta = base * (2 ** min(max(attempt - 1, 0), 30))
        return min(cap, grown)

    return delay
