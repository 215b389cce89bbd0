"""The inbox's decisions, free of I/O.

Validating a delivery and computing its digest and evidence row, judging
a ``sent_at`` against the retention horizon, turning what the claim found
into an entry or a refusal, and the wording of every refusal the guard
raises, for one command or a batch's. :mod:`inboxguard.inbox._flow` calls these in
order; nothing here touches a database.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inboxguard._core.clock import Clock, as_utc, checked_now
from inboxguard._core.context import adapter_settles_var
from inboxguard._core.digest import canonical_json, digest_of
from inboxguard._core.identity import named_commands, validate_identity
from inboxguard._core.retention import RetentionPolicy, format_duration
from inboxguard.errors import (
    BeyondRetentionError,
    ConfigurationError,
    InProgressError,
    PayloadMismatchError,
)
from inboxguard.inbox._quarantine import quarantine_values
from inboxguard.inbox._records import InboxEntry
from inboxguard.sql.dialects import Claim

__all__ = [
    "SQLALCHEMY_BOUNDARY",
    "BoundaryAdvice",
    "Delivery",
    "boundary_error",
    "busy_error",
    "prepare",
    "refusal_values",
    "result_json",
    "results_vanished_error",
    "stale_error",
    "verdict",
]

logger = logging.getLogger("inboxguard")


@dataclass(frozen=True, slots=True)
class Delivery:
    """A validated delivery: identity, digest and the values of its evidence
    row (``params``), which each store's claim writes."""

    consumer: str
    command_id: str
    digest: str
    now: dt.datetime
    params: dict[str, Any]
    details: Mapping[str, Any] | None

    def recognises(self, stored_digest: str) -> bool:
        """Whether evidence stored with ``stored_digest`` is this payload's."""
        return stored_digest == self.digest


def prepare(
    consumer: str,
    command_id: str,
    payload: object,
    exclude: Iterable[str],
    details: Mapping[str, Any] | None,
    *,
    retention: RetentionPolicy,
    clock: Clock,
) -> Delivery:
    """Validate a delivery and compute its digest and evidence row.

    Raises:
        InvalidCommandError: ``consumer`` or ``command_id`` is unusable.
        PayloadEncodingError: the payload has no canonical encoding.
        ConfigurationError: the clock returned something unusable.
    """
    validate_identity(consumer, "consumer")
    validate_identity(command_id, "command_id")
    excluded = exclude if isinstance(exclude, str) else tuple(exclude)
    digest = digest_of(payload, exclude=excluded)
    now = checked_now(clock)
    ttl = retention.result_ttl
    params = {
        "consumer": consumer,
        "command_id": command_id,
        "digest": digest,
        "processed_at": now,
        "expires_at": now + retention.horizon,
        "result_expires_at": now + ttl if ttl is not None else None,
    }
    return Delivery(consumer, command_id, digest, now, params, details)


def stale_error(
    delivery: Delivery, sent_at: dt.datetime, retention: RetentionPolicy
) -> BeyondRetentionError | None:
    """The refusal of a message sent before the horizon, or None when it is in time.

    A ``sent_at`` later than now plus ``retention.max_clock_skew`` is refused
    too: the producer's clock is ahead by more than the margin absorbs, so the
    message's age cannot be checked (an old message would look young).

    Raises:
        ConfigurationError: ``sent_at`` is not a timezone-aware datetime.
    """
    sent_at = as_utc(sent_at, "sent_at")
    latest = delivery.now + retention.max_clock_skew
    if sent_at > latest:
        return _from_the_future(delivery, sent_at, latest)
    limit = delivery.now - retention.max_message_age
    if sent_at >= limit:
        return None
    msg = (
        f"command {delivery.command_id!r} of consumer {delivery.consumer!r} was sent at"
        f" {sent_at.isoformat()}, more than {format_duration(retention.max_message_age)}"
        " ago: its evidence may be purged, so it was refused and quarantined; replay it"
        " deliberately once checked, or lengthen the RetentionPolicy"
    )
    return BeyondRetentionError(
        msg,
        consumer=delivery.consumer,
        command_id=delivery.command_id,
        sent_at=sent_at,
        limit=limit,
    )


def _from_the_future(
    delivery: Delivery, sent_at: dt.datetime, latest: dt.datetime
) -> BeyondRetentionError:
    msg = (
        f"command {delivery.command_id!r} of consumer {delivery.consumer!r} claims to be"
        f" sent at {sent_at.isoformat()}, after {latest.isoformat()} (now plus the allowed"
        " clock skew): the producer's clock is ahead, so the message's age cannot be"
        " checked; it was refused and quarantined; fix the producer's clock, then replay it"
    )
    return BeyondRetentionError(
        msg,
        consumer=delivery.consumer,
        command_id=delivery.command_id,
        sent_at=sent_at,
        limit=latest,
    )


def verdict(delivery: Delivery, claim: Claim) -> InboxEntry | PayloadMismatchError:
    """The entry of a fresh or duplicate command, or the mismatch (logged) to refuse."""
    if claim.fresh:
        return InboxEntry(
            consumer=delivery.consumer,
            command_id=delivery.command_id,
            digest=delivery.digest,
            duplicate=False,
        )
    if not delivery.recognises(claim.stored_digest):
        return _mismatch(delivery, claim.stored_digest)
    # Past result_ttl the result counts as dropped even before purge has
    # compacted the row, so what a duplicate sees never depends on purge timing.
    expired = claim.result_expires_at is not None and claim.result_expires_at <= delivery.now
    kept = None if expired else claim.result_json
    return InboxEntry(
        consumer=delivery.consumer,
        command_id=delivery.command_id,
        digest=delivery.digest,
        duplicate=True,
        result=json.loads(kept) if kept is not None else None,
        result_expired=expired,
    )


def result_json(entry: InboxEntry) -> str:
    """The canonical JSON of a fresh command's result, as every store keeps it.

    Raises:
        PayloadEncodingError: the result has no canonical encoding.
    """
    return canonical_json(entry.result, root="result")


def busy_error(consumer: str, command_ids: Sequence[str]) -> InProgressError:
    """The error of a claim (of one command, or of a batch's) that met a lock
    held past ``lock_timeout``, a deadlock or a serialization failure."""
    one = len(command_ids) == 1
    msg = (
        f"{named_commands(command_ids)} of consumer {consumer!r} {'is' if one else 'are'}"
        " being processed by another transaction (or the database reported a conflict):"
        " nothing was applied; roll back and deliver it again later"
    )
    return InProgressError(msg, consumer=consumer, command_id=command_ids[0])


@dataclass(frozen=True, slots=True)
class BoundaryAdvice:
    """How a driver's caller ends its transaction by mistake inside the block
    (``causes``) and how to fail one step safely instead (``savepoint``), for
    the error the flow raises when the transaction did not outlive the block."""

    causes: str
    savepoint: str


#: The advice for SQLAlchemy sessions and connections (the sync and async drivers).
SQLALCHEMY_BOUNDARY = BoundaryAdvice(
    causes=(
        "session.commit(), session.rollback(), conn.commit(), conn.rollback(), a raw COMMIT"
        " or ROLLBACK, a failed flush, or a database error caught inside the block without a"
        " savepoint of its own, which aborts the transaction on PostgreSQL"
    ),
    savepoint="session.begin_nested() (a savepoint)",
)


def boundary_error(
    consumer: str, command_ids: Sequence[str], advice: BoundaryAdvice
) -> ConfigurationError:
    """The error of a guarded block (of one command, or of a batch) whose
    transaction was committed or rolled back inside it."""
    one = len(command_ids) == 1
    rows = "its inbox row no longer commits" if one else "their inbox rows no longer commit"
    msg = (
        f"the transaction of {named_commands(command_ids)} (consumer {consumer!r}) was"
        f" committed or rolled back inside the guarded block ({advice.causes}): {rows} with"
        f" the block's changes, so {'the command' if one else 'commands'} could be lost or"
        " applied twice. Never commit or roll back inside the block; wrap a step that may"
        f" fail in {advice.savepoint} and let the caller end the transaction after the"
        " block. Roll back now"
    )
    return ConfigurationError(msg)


def results_vanished_error(
    consumer: str, command_ids: Sequence[str], matched: int, *, releasing: bool = False
) -> ConfigurationError:
    """The error of storing (or releasing) the results of claimed commands
    when the statements matched fewer inbox rows than there are commands."""
    one = len(command_ids) == 1
    action = "releasing" if releasing else f"storing the result{'' if one else 's'} of"
    msg = (
        f"{action} {named_commands(command_ids)} (consumer {consumer!r}) matched {matched}"
        f" inbox rows instead of {len(command_ids)}: {'its claim was' if one else 'claims were'}"
        " deleted or rolled back inside the guarded block. Never delete"
        f" {'the inbox row' if one else 'inbox rows'} or roll back past the claim inside the"
        " block. Roll back now"
    )
    return ConfigurationError(msg)


def _mismatch(delivery: Delivery, stored: str) -> PayloadMismatchError:
    # A WARNING for a caller of guard(); an adapter settling the delivery writes
    # its own one line with what it did, so here the line goes to DEBUG.
    log = logger.debug if adapter_settles_var.get() else logger.warning
    log(
        "payload mismatch: consumer=%s command_id=%s stored_digest=%s incoming_digest=%s;"
        " message quarantined",
        delivery.consumer,
        delivery.command_id,
        stored,
        delivery.digest,
        extra={
            "consumer": delivery.consumer,
            "command_id": delivery.command_id,
            "stored_digest": stored,
            "incoming_digest": delivery.digest,
        },
    )
    return PayloadMismatchError(
        consumer=delivery.consumer,
        command_id=delivery.command_id,
        stored_digest=stored,
        incoming_digest=delivery.digest,
    )


def refusal_values(
    delivery: Delivery, reason: str, *, stored_digest: str | None = None
) -> dict[str, Any]:
    """The quarantine record of a refused delivery, as every store writes it."""
    return quarantine_values(
        consumer=delivery.consumer,
        command_id=delivery.command_id,
        reason=str(reason),
        incoming_digest=delivery.digest,
        stored_digest=stored_digest,
        now=delivery.now,
        details=delivery.details,
    )
