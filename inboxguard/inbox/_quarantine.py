"""Quarantine records: their values, the log line of a write that failed, the
store operators read and resolve them through, and the rule every audited
action on them follows (:func:`audited`, shared by the SQL and Redis inboxes).

The write itself is an I/O request of the guard's flow (:mod:`._flow`), done
by a driver (:mod:`._drive`) in a transaction of its own."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, delete, func, insert, select, update
from sqlalchemy.engine import Connection, Engine, RowMapping

from inboxguard._core.details import encode_details
from inboxguard._core.text import storable_text
from inboxguard.errors import ConfigurationError
from inboxguard.inbox._records import QuarantineRecord
from inboxguard.sql.errors import INBOX_SCHEMA, schema_required
from inboxguard.sql.tables import InboxTables

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = [
    "QuarantineAction",
    "QuarantineReplay",
    "QuarantineStore",
    "audited",
    "log_not_written",
    "log_write_failure",
    "quarantine_values",
]


@dataclass(frozen=True, slots=True)
class QuarantineReplay:
    """One operator replay of a quarantine record: the message was published
    again to ``destination`` by ``replayed_by`` for ``reason`` at
    ``replayed_at``; ``receipt`` is what the transport answered."""

    id: int
    quarantine_id: int
    consumer: str
    command_id: str
    destination: str
    replayed_by: str
    reason: str
    replayed_at: dt.datetime
    receipt: Any


@dataclass(frozen=True, slots=True)
class QuarantineAction:
    """One operator action on a quarantine record, kept durably: ``action`` is
    ``"release"`` or ``"resolve"``, done by ``actor`` for ``reason`` at
    ``acted_at`` (UTC).

    A release removed the evidence that refused the command, so the next
    delivery of ``command_id`` is processed; ``evidence_digest`` and
    ``evidence_processed_at`` say which evidence it removed (None when there
    was none to remove: the refusal did not come from stored evidence).
    """

    id: int
    quarantine_id: int
    consumer: str
    command_id: str
    action: str
    actor: str
    reason: str
    acted_at: dt.datetime
    evidence_digest: str | None
    evidence_processed_at: dt.datetime | None


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
        self._replays = tables.quarantine_replays
        self._actions = tables.quarantine_actions
        self._evidence = tables.inbox

    def records(
        self,
        consumer: str | None = None,
        status: str | None = "open",
        *,
        record_id: int | None = None,
        limit: int | None = None,
        command_id: str | None = None,
        after: int | None = None,
    ) -> list[QuarantineRecord]:
        """Return quarantine records, oldest first (only ids above ``after``)."""
        stmt = self._select(consumer, status, record_id, limit, command_id, after)
        with schema_required(INBOX_SCHEMA), self._engine.connect() as conn:
            rows = conn.execute(stmt).mappings().all()
        return [_record(row) for row in rows]

    async def records_of_async(
        self, engine: AsyncEngine, consumer: str, command_id: str
    ) -> list[QuarantineRecord]:
        """Every record of one command (any status), oldest first, read
        through ``engine`` (an ``AsyncEngine`` on the same database)."""
        stmt = self._select(consumer, None, None, None, command_id, None)
        with schema_required(INBOX_SCHEMA):
            async with engine.connect() as conn:
                rows = (await conn.execute(stmt)).mappings().all()
        return [_record(row) for row in rows]

    def _select(
        self,
        consumer: str | None,
        status: str | None,
        record_id: int | None,
        limit: int | None,
        command_id: str | None,
        after: int | None,
    ) -> Select[Any]:
        q = self._table
        stmt = select(q).order_by(q.c.id).limit(limit)
        if after is not None:
            stmt = stmt.where(q.c.id > after)
        if consumer is not None:
            stmt = stmt.where(q.c.consumer == consumer)
        if command_id is not None:
            stmt = stmt.where(q.c.command_id == command_id)
        if status is not None:
            stmt = stmt.where(q.c.status == status)
        if record_id is not None:
            stmt = stmt.where(q.c.id == record_id)
        return stmt

    def count(self, consumer: str | None, status: str | None) -> int:
        """How many records match ``consumer`` and ``status`` (None: any)."""
        q = self._table
        stmt = select(func.count()).select_from(q)
        if consumer is not None:
            stmt = stmt.where(q.c.consumer == consumer)
        if status is not None:
            stmt = stmt.where(q.c.status == status)
        with schema_required(INBOX_SCHEMA), self._engine.connect() as conn:
            return int(conn.execute(stmt).scalar_one())

    def resolve(self, record_id: int) -> bool:
        """Mark one record resolved; return False when no open record has that id."""
        q = self._table
        stmt = update(q).where(q.c.id == record_id, q.c.status == "open").values(status="resolved")
        with schema_required(INBOX_SCHEMA), self._engine.begin() as conn:
            return bool(conn.execute(stmt).rowcount)

    def settle(
        self, record_id: int, action: str, actor: str, reason: str, now: dt.datetime
    ) -> QuarantineAction | None:
        """Mark an open record resolved and append ``action`` (``"release"`` or
        ``"resolve"``) to the audit trail, in one transaction; a release of a
        payload mismatch also deletes the evidence that refuses the record's
        payload, so the command is processed again. None when no open record
        has that id."""
        q = self._table
        opened = update(q).where(q.c.id == record_id, q.c.status == "open")
        with schema_required(INBOX_SCHEMA), self._engine.begin() as conn:
            row = conn.execute(select(q).where(q.c.id == record_id)).mappings().first()
            if row is None or not conn.execute(opened.values(status="resolved")).rowcount:
                return None
            removed = self._remove_evidence(conn, row) if action == "release" else None
            values = {
                "quarantine_id": record_id,
                "consumer": row["consumer"],
                "command_id": row["command_id"],
                "action": action,
                "actor": actor,
                "reason": reason,
                "acted_at": now,
                "evidence_digest": removed[0] if removed else None,
                "evidence_processed_at": removed[1] if removed else None,
            }
            inserted = conn.execute(insert(self._actions).values(**values)).inserted_primary_key
        new_id = int(inserted[0]) if inserted is not None else 0
        return QuarantineAction(id=new_id, **values)

    def _remove_evidence(
        self, conn: Connection, record: RowMapping
    ) -> tuple[str, dt.datetime] | None:
        """Delete the evidence that refuses ``record``'s payload: for a
        payload mismatch, the stored row of the same consumer and command
        whose digest is not the record's incoming one (the record's
        ``stored_digest`` may predate a later reopening). Its digest and time."""
        if record["reason"] != "payload_mismatch":
            return None
        ev = self._evidence
        which = (
            ev.c.consumer == record["consumer"],
            ev.c.command_id == record["command_id"],
            ev.c.digest != record["incoming_digest"],
        )
        found = conn.execute(select(ev.c.digest, ev.c.processed_at).where(*which)).first()
        if found is None:
            return None
        conn.execute(delete(ev).where(*which))
        return str(found[0]), found[1]

    def statuses(self, consumer: str, command_id: str) -> dict[str, int]:
        """How many records of one command have each status, in one query."""
        q = self._table
        stmt = (
            select(q.c.status, func.count())
            .where(q.c.consumer == consumer, q.c.command_id == command_id)
            .group_by(q.c.status)
        )
        with schema_required(INBOX_SCHEMA), self._engine.connect() as conn:
            return {str(status): int(n) for status, n in conn.execute(stmt).all()}

    def _of_command(self, consumer: str, command_id: str, through: int | None) -> Any:
        """The ids of one command's records (up to ``through``), as a subquery
        (its index serves it)."""
        q = self._table
        stmt = select(q.c.id).where(q.c.consumer == consumer, q.c.command_id == command_id)
        return stmt if through is None else stmt.where(q.c.id <= through)

    def actions(
        self,
        record_id: int | None,
        *,
        command: tuple[str, str] | None = None,
        through: int | None = None,
    ) -> list[QuarantineAction]:
        """The releases and resolutions recorded for one record, or for every
        record of ``command`` (consumer, command ID) whose id is at most
        ``through`` in one query, oldest first."""
        a = self._actions
        which = (
            a.c.quarantine_id.in_(self._of_command(*command, through))
            if command is not None
            else a.c.quarantine_id == record_id
        )
        stmt = select(a).where(which).order_by(a.c.id)
        with schema_required(INBOX_SCHEMA), self._engine.connect() as conn:
            rows = conn.execute(stmt).mappings().all()
        return [QuarantineAction(**row) for row in rows]

    def record_replay(
        self, record: QuarantineRecord, values: Mapping[str, Any]
    ) -> QuarantineReplay:
        """Append a replay of ``record`` (``destination``, ``replayed_by``,
        ``reason``, ``replayed_at``, ``receipt``) and mark the record resolved,
        in one transaction."""
        replays, q = self._replays, self._table
        row = {
            **values,
            "quarantine_id": record.id,
            "consumer": record.consumer,
            "command_id": record.command_id,
            "receipt": encode_details({"receipt": values.get("receipt")}),
        }
        with schema_required(INBOX_SCHEMA), self._engine.begin() as conn:
            inserted = conn.execute(insert(replays).values(**row)).inserted_primary_key
            new_id = inserted[0] if inserted is not None else None
            conn.execute(update(q).where(q.c.id == record.id).values(status="resolved"))
        return self.replays(record.id, replay_id=None if new_id is None else int(new_id))[-1]

    def replays(
        self,
        record_id: int | None,
        *,
        replay_id: int | None = None,
        command: tuple[str, str] | None = None,
        through: int | None = None,
    ) -> list[QuarantineReplay]:
        """The replays of one quarantine record, or of every record of
        ``command`` (consumer, command ID) whose id is at most ``through`` in
        one query, oldest first."""
        r = self._replays
        which = (
            r.c.quarantine_id.in_(self._of_command(*command, through))
            if command is not None
            else r.c.quarantine_id == record_id
        )
        stmt = select(r).where(which).order_by(r.c.id)
        if replay_id is not None:
            stmt = stmt.where(r.c.id == replay_id)
        with schema_required(INBOX_SCHEMA), self._engine.connect() as conn:
            rows = conn.execute(stmt).mappings().all()
        return [
            QuarantineReplay(
                **{k: v for k, v in row.items() if k != "receipt"},
                receipt=json.loads(row["receipt"])["receipt"] if row["receipt"] else None,
            )
            for row in rows
        ]


def audited(actor: str | None, reason: str | None) -> tuple[str, str]:
    """The non-empty actor and reason an audited action needs, made storable
    (escaped, bounded; see :func:`~inboxguard._core.text.storable_text`)."""
    if not all(isinstance(v, str) and v.strip() for v in (actor, reason)):
        msg = (
            "an audited quarantine action needs both actor= (who acts) and reason="
            " (why), each a non-empty string"
        )
        raise ConfigurationError(msg)
    who = storable_text(str(actor), what="a quarantine action's actor", limit=255)
    return who, storable_text(str(reason), what="a quarantine action's reason")


def _record(row: RowMapping) -> QuarantineRecord:
    return QuarantineRecord(
        **{k: v for k, v in row.items() if k != "details"},
        details=json.loads(row["details"]) if row["details"] else None,
    )
