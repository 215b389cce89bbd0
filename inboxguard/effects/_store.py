"""The ledger's reads and fenced writes, each in a short transaction of its own.

Every write after the insert is an UPDATE conditioned on the row's expected
``state``, ``version`` and ``fencing_token``: it changes one row or none. A
worker that reads a row and then loses a race (another worker took the lease
over, or recorded an outcome first) changes nothing and finds out from the
row count, on PostgreSQL, MariaDB/MySQL and SQLite alike.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, func, insert, or_, select, update
from sqlalchemy.engine import Connection, Engine, RowMapping
from sqlalchemy.exc import IntegrityError

from inboxguard._core.details import encode_details
from inboxguard._core.text import MAX_RECEIPT_DETAILS, escaped_text, storable_text
from inboxguard.effects._records import EffectRecord, EffectTransition
from inboxguard.effects.provider import Receipt
from inboxguard.effects.state import EffectState
from inboxguard.sql.errors import LEDGER_SCHEMA, schema_required
from inboxguard.sql.tables import EffectTables

__all__ = [
    "Event",
    "Held",
    "Store",
    "oversized_details",
    "prepared_row",
    "receipt_columns",
    "to_record",
    "unstorable_receipt",
]


@dataclass(frozen=True, slots=True)
class Held:
    """An effect whose lease this worker holds, as of its last write."""

    key: str
    state: EffectState
    version: int
    token: int
    owner: str
    first_sent_at: dt.datetime


@dataclass(frozen=True, slots=True)
class Event:
    """The history entry written with a change."""

    name: str
    actor: str
    at: dt.datetime
    note: str | None = None


class Store:
    """Statements over one prefix's tables."""

    def __init__(self, engine: Engine, tables: EffectTables) -> None:
        self.engine = engine
        self.tables = tables

    @contextmanager
    def _begin(self) -> Iterator[Connection]:
        """A transaction of its own; a missing table says how to create it."""
        with schema_required(LEDGER_SCHEMA), self.engine.begin() as conn:
            yield conn

    @contextmanager
    def _connect(self) -> Iterator[Connection]:
        """A connection for reads; a missing table says how to create it."""
        with schema_required(LEDGER_SCHEMA), self.engine.connect() as conn:
            yield conn

    # -- writes ---------------------------------------------------------------------------

    def insert_prepared(self, values: Mapping[str, Any], event: Event) -> Held | None:
        """Insert a new ``prepared`` row holding the lease; None if the key exists."""
        try:
            with self._begin() as conn:
                conn.execute(insert(self.tables.effects).values(**values))
                self._history(conn, values["effect_key"], None, EffectState.PREPARED, 1, 1, event)
        except IntegrityError:
            return None
        return Held(
            values["effect_key"],
            EffectState.PREPARED,
            1,
            1,
            values["lease_owner"],
            values["first_sent_at"],
        )

    def take_over(
        self, record: EffectRecord, owner: str, expires: dt.datetime, event: Event
    ) -> Held | None:
        """Acquire the lease with a new fencing token; None if the row moved meanwhile."""
        effects = self.tables.effects
        token = record.fencing_token + 1
        version = record.version + 1
        stmt = (
            update(effects)
            .where(
                effects.c.effect_key == record.effect_key,
                effects.c.state == str(record.state),
                effects.c.version == record.version,
            )
            .values(
                fencing_token=token,
                version=version,
                lease_owner=owner,
                lease_expires_at=expires,
                updated_at=event.at,
            )
        )
        with self._begin() as conn:
            if conn.execute(stmt).rowcount != 1:
                return None
            self._history(
                conn, record.effect_key, record.state, record.state, version, token, event
            )
        return Held(record.effect_key, record.state, version, token, owner, record.first_sent_at)

    def fenced_update(
        self, held: Held, target: EffectState, values: Mapping[str, Any], event: Event
    ) -> Held | None:
        """Move a held effect to ``target`` (or keep its state) with ``values``.

        Returns the new hold, or None when the row no longer matches this
        worker's state, version and fencing token (a stale lease).
        """
        effects = self.tables.effects
        version = held.version + 1
        stmt = (
            update(effects)
            .where(
                effects.c.effect_key == held.key,
                effects.c.state == str(held.state),
                effects.c.version == held.version,
                effects.c.fencing_token == held.token,
            )
            .values(state=str(target), version=version, updated_at=event.at, **values)
        )
        with self._begin() as conn:
            if conn.execute(stmt).rowcount != 1:
                return None
            self._history(conn, held.key, held.state, target, version, held.token, event)
        return Held(held.key, target, version, held.token, held.owner, held.first_sent_at)

    def renew(self, held: Held, expires: dt.datetime) -> bool:
        """Move a held lease's end to ``expires``; False when the lease is lost."""
        effects = self.tables.effects
        stmt = (
            update(effects)
            .where(
                effects.c.effect_key == held.key,
                effects.c.state == str(held.state),
                effects.c.version == held.version,
                effects.c.fencing_token == held.token,
            )
            .values(lease_expires_at=expires)
        )
        with self._begin() as conn:
            return bool(conn.execute(stmt).rowcount == 1)

    def add_history(self, record: EffectRecord, event: Event) -> None:
        """Append ``event`` to an effect's history without changing the effect."""
        with self._begin() as conn:
            self._history(
                conn,
                record.effect_key,
                record.state,
                record.state,
                record.version,
                record.fencing_token,
                event,
            )

    def _history(
        self,
        conn: Connection,
        key: str,
        source: EffectState | None,
        target: EffectState,
        version: int,
        token: int,
        event: Event,
    ) -> None:
        conn.execute(
            insert(self.tables.history).values(
                effect_key=key,
                from_state=None if source is None else str(source),
                to_state=str(target),
                event=event.name,
                version=version,
                fencing_token=token,
                actor=event.actor[:255],
                at=event.at,
                note=event.note,
            )
        )

    # -- reads ----------------------------------------------------------------------------

    def read(self, key: str, *, history: bool = False) -> EffectRecord | None:
        """The committed record of ``key`` (with its history if asked), or None."""
        effects = self.tables.effects
        with self._connect() as conn:
            row = (
                conn.execute(select(effects).where(effects.c.effect_key == key)).mappings().first()
            )
            if row is None:
                return None
            entries: tuple[EffectTransition, ...] = ()
            if history:
                entries = self._read_history(conn, key)
        return to_record(row, entries)

    def _read_history(self, conn: Connection, key: str) -> tuple[EffectTransition, ...]:
        h = self.tables.history
        rows = conn.execute(select(h).where(h.c.effect_key == key).order_by(h.c.id)).mappings()
        return tuple(
            EffectTransition(
                from_state=None if r["from_state"] is None else EffectState(r["from_state"]),
                to_state=EffectState(r["to_state"]),
                event=r["event"],
                version=r["version"],
                fencing_token=r["fencing_token"],
                actor=r["actor"],
                at=r["at"],
                note=r["note"],
            )
            for r in rows
        )

    def select(
        self,
        *,
        states: tuple[EffectState, ...] | None = None,
        provider: str | None = None,
        updated_before: dt.datetime | None = None,
        limit: int = 100,
        after: tuple[dt.datetime, str] | None = None,
    ) -> list[EffectRecord]:
        """Records matching the filters, least recently updated first (then by
        key); ``after`` (an update time and key) starts past that record."""
        effects = self.tables.effects
        stmt = select(effects).order_by(effects.c.updated_at, effects.c.effect_key).limit(limit)
        if after is not None:
            at, key = after
            later = effects.c.updated_at > at
            stmt = stmt.where(
                or_(later, and_(effects.c.updated_at == at, effects.c.effect_key > key))
            )
        if states is not None:
            stmt = stmt.where(effects.c.state.in_([str(s) for s in states]))
        if provider is not None:
            stmt = stmt.where(effects.c.provider == provider)
        if updated_before is not None:
            stmt = stmt.where(effects.c.updated_at <= updated_before)
        with self._connect() as conn:
            rows = conn.execute(stmt).mappings().all()
        return [to_record(row, ()) for row in rows]

    def count(self, states: tuple[EffectState, ...] | None = None) -> int:
        """How many records are in ``states`` (None: every record)."""
        effects = self.tables.effects
        stmt = select(func.count()).select_from(effects)
        if states is not None:
            stmt = stmt.where(effects.c.state.in_([str(s) for s in states]))
        with self._connect() as conn:
            return int(conn.execute(stmt).scalar_one())


def prepared_row(
    key: str, provider: str, digest: str, owner: str, now: dt.datetime, lease: dt.timedelta
) -> dict[str, Any]:
    """The first row of an effect: ``prepared``, leased to ``owner``, one attempt."""
    return {
        "effect_key": key,
        "provider": provider,
        "digest": digest,
        "state": str(EffectState.PREPARED),
        "version": 1,
        "fencing_token": 1,
        "lease_owner": owner,
        "lease_expires_at": now + lease,
        "attempts": 1,
        "first_sent_at": now,
        "created_at": now,
        "updated_at": now,
    }


def receipt_columns(receipt: Receipt | None, prefix: str) -> dict[str, Any]:
    """The columns storing ``receipt`` (``receipt_*`` or ``compensation_*``),
    made storable on every database (see :func:`unstorable_receipt`)."""
    if receipt is None:
        return {}
    details = encode_details(receipt.details)
    if details is not None and len(details) > MAX_RECEIPT_DETAILS:
        details = encode_details({"details_too_large": len(details), "limit": MAX_RECEIPT_DETAILS})
    return {
        f"{prefix}_reference": storable_text(
            receipt.reference, what="a receipt's reference", limit=255
        ),
        f"{prefix}_details": details,
    }


def unstorable_receipt(receipt: Receipt) -> str | None:
    """Why ``receipt`` cannot be stored as given (None: it can): its details
    are too large (see :func:`oversized_details`), or its reference holds
    characters a database refuses (stored escaped)."""
    size = oversized_details(receipt)
    if size is not None:
        return (
            f"the receipt's details are {size} characters once encoded, over the limit of"
            f" {MAX_RECEIPT_DETAILS}: only its reference {receipt.reference!r} is stored"
        )
    if escaped_text(receipt.reference) != receipt.reference:
        return f"the receipt's reference {receipt.reference!r} is stored escaped"
    return None


def oversized_details(receipt: Receipt) -> int | None:
    """The encoded length of ``receipt``'s details when it is over
    :data:`MAX_RECEIPT_DETAILS` (None: they fit)."""
    details = encode_details(receipt.details)
    if details is not None and len(details) > MAX_RECEIPT_DETAILS:
        return len(details)
    return None


def _receipt(reference: str | None, details: str | None) -> Receipt | None:
    if reference is None:
        return None
    return Receipt(reference, json.loads(details) if details else None)


def to_record(row: RowMapping, history: tuple[EffectTransition, ...]) -> EffectRecord:
    """Build a record from an effects row."""
    return EffectRecord(
        effect_key=row["effect_key"],
        provider=row["provider"],
        state=EffectState(row["state"]),
        digest=row["digest"],
        receipt=_receipt(row["receipt_reference"], row["receipt_details"]),
        attempts=row["attempts"],
        version=row["version"],
        fencing_token=row["fencing_token"],
        lease_owner=row["lease_owner"],
        lease_expires_at=row["lease_expires_at"],
        applied=None if row["applied"] is None else bool(row["applied"]),
        compensation=_receipt(row["compensation_reference"], row["compensation_details"]),
        last_error=row["last_error"],
        first_sent_at=row["first_sent_at"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        history=history,
    )
