"""The ledger's tables: one row per effect, and an append-only history.

The effects row carries the state, the payload digest, the receipt, a
``version`` bumped by every write and a ``fencing_token`` bumped by every lease
acquisition; every write after the first is an UPDATE conditioned on the
fencing token and the expected state, so a fenced-out worker changes nothing.
The history table is only ever inserted into.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sqlalchemy import (
    Boolean,
    Column,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
)

from inboxguard.sql.schema import NAMING_CONVENTION, UtcDateTime, digest_type, id_type, long_text

__all__ = ["EffectTables", "effect_tables"]


@dataclass(frozen=True, slots=True)
class EffectTables:
    """The tables of one prefix: ``effects`` and ``history``."""

    metadata: MetaData
    effects: Table
    history: Table


@functools.cache
def effect_tables(prefix: str) -> EffectTables:
    """Return the (cached) ledger tables for ``prefix``; one MetaData per prefix."""
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    effects = Table(
        f"{prefix}effects",
        metadata,
        Column("effect_key", id_type(), nullable=False),
        Column("provider", String(255), nullable=False),
        Column("digest", digest_type(), nullable=False),
        Column("state", String(16), nullable=False),
        Column("version", Integer, nullable=False),
        Column("fencing_token", Integer, nullable=False),
        Column("lease_owner", String(255), nullable=True),
        Column("lease_expires_at", UtcDateTime(), nullable=True),
        Column("attempts", Integer, nullable=False),
        Column("applied", Boolean, nullable=True),
        Column("receipt_reference", String(255), nullable=True),
        Column("receipt_details", long_text(), nullable=True),
        Column("compensation_reference", String(255), nullable=True),
        Column("compensation_details", long_text(), nullable=True),
        Column("last_error", long_text(), nullable=True),
        Column("first_sent_at", UtcDateTime(), nullable=False),
        Column("created_at", UtcDateTime(), nullable=False),
        Column("updated_at", UtcDateTime(), nullable=False),
        PrimaryKeyConstraint("effect_key"),
        Index(f"ix_{prefix}effects_state", "state", "updated_at"),
    )
    history = Table(
        f"{prefix}effect_history",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("effect_key", id_type(), nullable=False),
        Column("from_state", String(16), nullable=True),
        Column("to_state", String(16), nullable=False),
        Column("event", String(32), nullable=False),
        Column("version", Integer, nullable=False),
        Column("fencing_token", Integer, nullable=False),
        Column("actor", String(255), nullable=False),
        Column("at", UtcDateTime(), nullable=False),
        Column("note", long_text(), nullable=True),
        Index(f"ix_{prefix}effect_history_key", "effect_key", "id"),
    )
    return EffectTables(metadata, effects, history)
