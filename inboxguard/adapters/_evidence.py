"""Make a refused delivery durable before any adapter lets it go.

A delivery may leave the broker (acked, or dead-lettered where the broker
drops rejected messages) only once a quarantine record holds it. The inbox
writes the record of a payload mismatch or a stale message itself, but a
write that fails only logs; a refusal the inbox never saw (no usable command
ID, a result that cannot be stored) has no record at all. :func:`record_refusal`
answers, for either, whether a record now holds the delivery; the adapters
feed the answer to :meth:`Outcome.recorded` and send an unrecorded delivery
back to the broker.

Imports no framework.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from inboxguard import Inbox, InboxStore
from inboxguard.errors import InboxGuardError, InvalidCommandError

__all__ = ["Refused", "command_id_of", "record_refusal", "record_refusal_async"]

logger = logging.getLogger("inboxguard")


@dataclass(frozen=True, slots=True)
class Refused:
    """One refused delivery, as the quarantine record keeps it.

    ``command_id`` is None when it could not be computed; the record is then
    filed under ``message:<message_id>``.
    """

    consumer: str
    command_id: str | None
    message_id: str | None
    payload: object
    exclude: tuple[str, ...]
    details: Mapping[str, Any]

    def filed_under(self, command_id: str) -> Refused:
        """This delivery once its command ID is known: ``dataclasses.replace``
        spelled out (every delivery passes here; replace reads the fields
        anew each time). A new field goes here too."""
        return Refused(
            self.consumer, command_id, self.message_id, self.payload, self.exclude, self.details
        )

    def records(self, error: BaseException, reason: str | None = None) -> list[dict[str, Any]]:
        """Keyword arguments of ``quarantine_delivery``: as given, then a fallback
        (the message ID and the payload's text) for a delivery whose command ID
        or payload the inbox cannot take."""
        details = {**self.details, "last_error": repr(error)}
        why = reason or refusal_reason(error)
        out = []
        if self.command_id is not None:
            out.append(self._record(self.command_id, self.payload, why, details))
        if self.message_id:
            out.append(self._record(f"message:{self.message_id}", repr(self.payload), why, details))
        return out

    def _record(
        self, command_id: str, payload: object, reason: str, details: Mapping[str, Any]
    ) -> dict[str, Any]:
        return {
            "consumer": self.consumer,
            "command_id": command_id,
            "payload": payload,
            "reason": reason,
            "exclude": self.exclude if payload is self.payload else (),
            "details": details,
        }


def refusal_reason(error: BaseException) -> str:
    """The quarantine reason of a refusal the inbox did not record itself
    (``invalid_command``, ``payload_encoding``, ...): the error's code."""
    code = getattr(error, "code", None) or type(error).__name__
    return str(code).replace("-", "_")


def command_id_of(getter: Any, *args: Any) -> str:
    """The command ID a getter computes; any failure of the user's callable is
    an :class:`InvalidCommandError` (refused, quarantined), never a crash."""
    try:
        return str(getter(*args))
    except InboxGuardError:
        raise
    except Exception as error:
        msg = f"the command ID cannot be computed from this delivery: {error!r}"
        raise InvalidCommandError(msg) from error


def record_refusal(
    inbox: InboxStore, error: BaseException, refused: Refused, reason: str | None = None
) -> bool:
    """True once a quarantine record holds the refused delivery.

    A refusal the inbox quarantined itself is looked up (its write may have
    failed); any other is written now. False when neither worked: the
    delivery must go back to the broker.
    """
    if getattr(error, "quarantined", False) and reason is None:
        return _found(inbox, error)
    for record in refused.records(error, reason):
        try:
            return inbox.quarantine_delivery(**record)
        except InboxGuardError:  # no usable command ID or payload: try the fallback
            continue
    return False


async def record_refusal_async(
    inbox: Inbox,
    engine: AsyncEngine,
    error: BaseException,
    refused: Refused,
    reason: str | None = None,
) -> bool:
    """:func:`record_refusal` through an ``AsyncEngine`` on the inbox's database."""
    if getattr(error, "quarantined", False) and reason is None:
        return await _found_async(inbox, engine, error)
    for record in refused.records(error, reason):
        try:
            return await inbox.quarantine_delivery_async(engine, **record)
        except InboxGuardError:
            continue
    return False


def _found(inbox: InboxStore, error: BaseException) -> bool:
    """Whether an open quarantine record holds the command the error names."""
    named = _command_of(error)
    if named is None:
        return False
    try:
        records = inbox.quarantine_records_of(*named)
    except Exception:
        logger.exception("could not look up the quarantine record of %r", error)
        return False
    return any(record.status == "open" for record in records)


async def _found_async(inbox: Inbox, engine: AsyncEngine, error: BaseException) -> bool:
    """:func:`_found` through an ``AsyncEngine``."""
    named = _command_of(error)
    if named is None:
        return False
    try:
        records = await inbox.quarantine_records_of_async(engine, *named)
    except Exception:
        logger.exception("could not look up the quarantine record of %r", error)
        return False
    return any(record.status == "open" for record in records)


def _command_of(error: BaseException) -> tuple[str, str] | None:
    """The (consumer, command_id) a refusal names, or None."""
    consumer = getattr(error, "consumer", None)
    command_id = getattr(error, "command_id", None)
    if not isinstance(consumer, str) or not isinstance(command_id, str):
        return None
    return consumer, command_id
