"""Quarantine records: their values, the log line of a write that failed, and
the store operators read and resolve them through.

The write itself is an I/O request of the guard's flow (:mod:`._flow`), done
by a driver (:mod:`._drive`) in a transaction of its own."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Engine

from inboxguard._core.details import encode_details
from inboxguard.inbox._records import QuarantineRecord
from inboxguard.sql.tables import InboxTables

__all__ = ["QuarantineStore", "log_not_written", "log_write_failure", "quarantine_values"]

logger = logging.getLogger("inboxguard")


def quarantine_values(
    *,
    consumer: str,
    command_id: str,
    reason: str,
    incoming_digest: str,
    stored_digest: str | None,
    now: dt.datetime,
    details: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The parameters of a quarantine upsert."""
    return {
        "consumer": consumer,
        "command_id": command_id,
        "reason": reason,
        "incoming_digest": incoming_digest,
        "stored_digest": stored_digest,
        "first_seen_at": now,
        "last_seen_at": now,
        "occurrences": 1,
        "status": "open",
        "details": encode_details(details),
    }


def log_write_failure(values: Mapping[str, Any]) -> None:
    """Log, with the whole record, a quarantine write that failed (call in ``except``)."""
    logger.exception(
        "could not write the quarantine record for %s/%s (%s); the message is"
        " refused anyway; record: %s",
        values["consumer"],
        values["command_id"],
        values["reason"],
        dict(values),
    )


def log_not_written(values: Mapping[str, Any], why: str) -> None:
    """Log at ERROR, with the whole record, a quarantine write that was not
    attempted because no connection of its own was available (``why``)."""
    logger.error(
        "did not write the quarantine record for %s/%s (%s): %s; the message is"
        " refused anyway; record: %s",
        values["consumer"],
        values["command_id"],
        values["reason"],
        why,
        dict(values),
    )


class QuarantineStore:
    """The quarantine table, read and resolved for operators through the engine."""

    def __init__(self, engine: Engine, tables: InboxTables) -> None:
        self._engine = engine
        self._table = tables.quarantine

    def records(
        self,
        consumer: str | None = None,
        status: str | None = "open",
        *,
        record_id: int | None = None,
        limit: int | None = None,
    ) -> list[QuarantineRecord]:
        """Return quarantine records, oldest first."""
        q = self._table
        stmt = select(q).order_by(q.c.id).limit(limit)
        if consumer is not None:
            stmt = stmt.where(q.c.consumer == consumer)
        if status is not None:
            stmt = stmt.where(q.c.status == status)
        if record_id is not None:
            stmt = stmt.where(q.c.id == record_id)
        with self._engine.connect() as conn:
            rows = conn.execute(stmt).mappings().all()
        return [
            QuarantineRecord(
                **{k: v for k, v in row.items() if k != "details"},
                details=json.loads(row["details"]) if row["details"] else None,
            )
            for row in rows
        ]

    def resolve(self, record_id: int) -> bool:
        """Mark one record resolved; return False when no open record has that id."""
        q = self._table
        stmt = update(q).where(q.c.id == record_id, q.c.status == "open").values(status="resolved")
        with self._engine.begin() as conn:
            return bool(conn.execute(stmt).rowcount)
