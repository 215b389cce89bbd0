"""The values the inbox hands back: the guard's entry and stored records."""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass
from typing import Any

__all__ = ["InboxEntry", "InboxRecord", "QuarantineReason", "QuarantineRecord"]


class QuarantineReason(enum.StrEnum):
    """Why a message was quarantined (stored lowercase in ``reason``)."""

    PAYLOAD_MISMATCH = "payload_mismatch"
    BEYOND_RETENTION = "beyond_retention"
    RETRIES_EXHAUSTED = "retries_exhausted"
    #: The handler failed for good and the framework's failure path drops the
    #: message where the broker has no dead-letter queue (Celery on Redis).
    HANDLER_FAILED = "handler_failed"


class InboxEntry:
    """What the guard decided for one delivery.

    ``duplicate`` is true when the command was already committed with the same
    digest; ``result`` is then the stored result (``None`` and
    ``result_expired`` true when the result outlived its ``result_ttl``). For a
    fresh command, assign ``result``: it is stored in the same transaction when
    the block exits normally.
    """

    __slots__ = (
        "_result",
        "_result_set",
        "command_id",
        "consumer",
        "digest",
        "duplicate",
        "result_expired",
    )

    def __init__(
        self,
        *,
        consumer: str,
        command_id: str,
        digest: str,
        duplicate: bool,
        result: Any = None,
        result_expired: bool = False,
    ) -> None:
        self.consumer = consumer
        self.command_id = command_id
        self.digest = digest
        self.duplicate = duplicate
        self.result_expired = result_expired
        self._result = result
        self._result_set = False

    @property
    def result(self) -> Any:
        """The stored result (duplicate) or the one assigned in the block."""
        return self._result

    @result.setter
    def result(self, value: Any) -> None:
        if self.duplicate:
            msg = "a duplicate's result is the stored one and cannot be replaced"
            raise AttributeError(msg)
        self._result = value
        self._result_set = True

    def __repr__(self) -> str:
        """Show the identity and the decision."""
        kind = "duplicate" if self.duplicate else "fresh"
        return f"<InboxEntry {kind} {self.consumer}/{self.command_id} {self.digest[:15]}…>"


@dataclass(frozen=True, slots=True)
class InboxRecord:
    """The stored evidence of one processed command."""

    consumer: str
    command_id: str
    digest: str
    result: Any
    processed_at: dt.datetime
    expires_at: dt.datetime
    result_expires_at: dt.datetime | None


@dataclass(frozen=True, slots=True)
class QuarantineRecord:
    """A message the inbox refused, kept for an operator to inspect and replay.

    ``details`` holds what the adapter knew of the message (arguments,
    headers, properties) so it can be replayed by hand.
    """

    id: int
    consumer: str
    command_id: str
    reason: str
    stored_digest: str | None
    incoming_digest: str
    first_seen_at: dt.datetime
    last_seen_at: dt.datetime
    occurrences: int
    status: str
    details: dict[str, Any] | None
