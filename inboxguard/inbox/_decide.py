"""The inbox's decisions, shared by the sync and async guards.

Everything here but :meth:`Decisions.quarantine` is free of I/O: validating a
delivery, computing the claim's parameters, and turning what the claim found
into an entry or a refusal. :class:`inboxguard.Inbox` inherits it.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.engine import Engine

from inboxguard._core.clock import Clock, checked_now
from inboxguard._core.digest import canonical_json, digest_of
from inboxguard._core.identity import validate_identity
from inboxguard._core.retention import RetentionPolicy, format_duration
from inboxguard.errors import (
    BeyondRetentionError,
    ConfigurationError,
    InProgressError,
    PayloadMismatchError,
)
from inboxguard.inbox import _quarantine
from inboxguard.inbox._records import InboxEntry, QuarantineReason
from inboxguard.sql.dialects import Claim, Dialect, dialect_for
from inboxguard.sql.schema import InboxTables

__all__ = ["Decisions", "Prepared", "busy_error"]

logger = logging.getLogger("inboxguard")


@dataclass(frozen=True, slots=True)
class Prepared:
    """A validated delivery: identity, digest and the claim's parameters."""

    consumer: str
    command_id: str
    digest: str
    now: dt.datetime
    params: dict[str, Any]
    details: Mapping[str, Any] | None


class Decisions:
    """Validation, claim parameters and verdicts, mixed into :class:`inboxguard.Inbox`."""

    engine: Engine
    tables: InboxTables
    retention: RetentionPolicy
    clock: Clock
    lock_timeout: dt.timedelta | None
    _dialects: dict[str, Dialect]

    def prepare(
        self,
        consumer: str,
        command_id: str,
        payload: object,
        exclude: Iterable[str] = (),
        sent_at: dt.datetime | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> Prepared:
        """Validate a delivery and compute its digest and claim parameters.

        Writes nothing. Raises as :meth:`guard` does, except that a stale
        ``sent_at`` is quarantined here (in its own transaction) and raised.
        """
        prepared, stale = self.assess(consumer, command_id, payload, exclude, sent_at, details)
        if stale is not None:
            self.quarantine(prepared, QuarantineReason.BEYOND_RETENTION)
            raise stale
        return prepared

    def assess(
        self,
        consumer: str,
        command_id: str,
        payload: object,
        exclude: Iterable[str] = (),
        sent_at: dt.datetime | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> tuple[Prepared, BeyondRetentionError | None]:
        """Like :meth:`prepare`, but return the stale verdict instead of acting on it.

        Performs no I/O at all: a caller with its own driver (the async guard)
        quarantines and raises the returned :class:`BeyondRetentionError` itself.
        """
        validate_identity(consumer, "consumer")
        validate_identity(command_id, "command_id")
        digest = digest_of(payload, exclude=exclude)
        now = checked_now(self.clock)
        ttl = self.retention.result_ttl
        params = {
            "consumer": consumer,
            "command_id": command_id,
            "key_consumer": consumer,
            "key_command_id": command_id,
            "digest": digest,
            "processed_at": now,
            "expires_at": now + self.retention.horizon,
            "result_expires_at": now + ttl if ttl is not None else None,
        }
        prepared = Prepared(consumer, command_id, digest, now, params, details)
        stale = self._stale_error(prepared, sent_at) if sent_at is not None else None
        return prepared, stale

    def judge(self, prepared: Prepared, claim: Claim) -> InboxEntry:
        """Turn a claim into an entry, or quarantine and raise on a mismatch."""
        found = self.verdict(prepared, claim)
        if isinstance(found, PayloadMismatchError):
            self.quarantine(
                prepared, QuarantineReason.PAYLOAD_MISMATCH, stored_digest=found.stored_digest
            )
            raise found
        return found

    def verdict(self, prepared: Prepared, claim: Claim) -> InboxEntry | PayloadMismatchError:
        """Like :meth:`judge`, but return a mismatch (logged) instead of acting on it."""
        if claim.fresh:
            return InboxEntry(
                consumer=prepared.consumer,
                command_id=prepared.command_id,
                digest=prepared.digest,
                duplicate=False,
            )
        if claim.stored_digest != prepared.digest:
            return self._mismatch(prepared, claim.stored_digest)
        # Past result_ttl the result counts as dropped even before purge has
        # compacted the row, so what a duplicate sees never depends on purge timing.
        expired = claim.result_expires_at is not None and claim.result_expires_at <= prepared.now
        kept = None if expired else claim.result_json
        return InboxEntry(
            consumer=prepared.consumer,
            command_id=prepared.command_id,
            digest=prepared.digest,
            duplicate=True,
            result=json.loads(kept) if kept is not None else None,
            result_expired=expired,
        )

    def result_params(self, prepared: Prepared, entry: InboxEntry) -> dict[str, Any]:
        """Parameters of the statement that stores a fresh command's result."""
        return {
            "key_consumer": prepared.consumer,
            "key_command_id": prepared.command_id,
            "new_result": canonical_json(entry.result, root="result"),
        }

    def dialect(self, conn: Connection) -> Dialect:
        """The (cached) inbox dialect for a connection's database."""
        name = conn.dialect.name
        found = self._dialects.get(name)
        if found is None:
            found = self._dialects[name] = dialect_for(conn.dialect, self.tables, self.lock_timeout)
        return found

    def _stale_error(self, prepared: Prepared, sent_at: dt.datetime) -> BeyondRetentionError | None:
        if not isinstance(sent_at, dt.datetime) or sent_at.utcoffset() is None:
            msg = f"sent_at must be a timezone-aware datetime, got {sent_at!r}"
            raise ConfigurationError(msg)
        limit = prepared.now - self.retention.max_message_age
        if sent_at >= limit:
            return None
        msg = (
            f"command {prepared.command_id!r} of consumer {prepared.consumer!r} was sent at"
            f" {sent_at.isoformat()}, more than {format_duration(self.retention.max_message_age)}"
            " ago: its evidence may be purged, so it was refused and quarantined; replay it"
            " deliberately once checked, or lengthen the RetentionPolicy"
        )
        return BeyondRetentionError(
            msg,
            consumer=prepared.consumer,
            command_id=prepared.command_id,
            sent_at=sent_at,
            limit=limit,
        )

    def _mismatch(self, prepared: Prepared, stored: str) -> PayloadMismatchError:
        logger.warning(
            "payload mismatch: consumer=%s command_id=%s stored_digest=%s incoming_digest=%s;"
            " message quarantined",
            prepared.consumer,
            prepared.command_id,
            stored,
            prepared.digest,
            extra={
                "consumer": prepared.consumer,
                "command_id": prepared.command_id,
                "stored_digest": stored,
                "incoming_digest": prepared.digest,
            },
        )
        return PayloadMismatchError(
            consumer=prepared.consumer,
            command_id=prepared.command_id,
            stored_digest=stored,
            incoming_digest=prepared.digest,
        )

    # -- quarantine writes ----------------------------------------------------------------

    def quarantine(
        self, prepared: Prepared, reason: str, *, stored_digest: str | None = None
    ) -> bool:
        """Write (or count again) a quarantine record in its own transaction.

        Returns False if the record could not be written; the failure is
        logged with the whole record, and the refusal stands regardless.
        """
        values = self.quarantine_values(prepared, reason, stored_digest=stored_digest)
        with self.engine.connect() as probe:
            stmt = self.dialect(probe).upsert_quarantine()
        return _quarantine.write_quarantine(self.engine, stmt, values)

    def quarantine_values(
        self, prepared: Prepared, reason: str, *, stored_digest: str | None = None
    ) -> dict[str, Any]:
        """Parameters of the dialect's ``upsert_quarantine()`` statement for a delivery."""
        return _quarantine.quarantine_values(
            consumer=prepared.consumer,
            command_id=prepared.command_id,
            reason=str(reason),
            incoming_digest=prepared.digest,
            stored_digest=stored_digest,
            now=prepared.now,
            details=prepared.details,
        )


def busy_error(prepared: Prepared) -> InProgressError:
    """The error for a claim that met a lock timeout, deadlock or serialization
    failure."""
    msg = (
        f"command {prepared.command_id!r} of consumer {prepared.consumer!r} is being"
        " processed by another transaction (or the database reported a conflict);"
        " roll back and deliver it again later"
    )
    return InProgressError(msg, consumer=prepared.consumer, command_id=prepared.command_id)
