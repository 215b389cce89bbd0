"""The outbox table, as SQLAlchemy Core, on one MetaData per table prefix.

One row per outgoing command. ``due_at`` drives polling: it holds the time
the row may next be claimed while the row is pending (or leased), and is
NULL once the row is delivered or dead. The polling index covers ``due_at``
only, so it stays as small as the backlog (on PostgreSQL it is a partial
index that leaves finished rows out altogether).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    text,
)

from inboxguard.sql.schema import NAMING_CONVENTION, UtcDateTime, digest_type, id_type, long_text

__all__ = ["OutboxTables", "outbox_tables"]


@dataclass(frozen=True, slots=True)
class OutboxTables:
    """The outbox table of one prefix."""

    metadata: MetaData
    outbox: Table


@functools.cache
def outbox_tables(prefix: str) -> OutboxTables:
    """Return the (cached) outbox table for ``prefix``."""
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    name = f"{prefix}outbox"
    outbox = Table(
        name,
        metadata,
        Column(
            "id",
            BigInteger().with_variant(Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        Column("command_id", id_type(), nullable=False),
        Column("destination", id_type(), nullable=False),
        # NULL once compacted: the identity and digest outlive the payload.
        Column("payload", long_text(), nullable=True),
        Column("headers", long_text(), nullable=True),
        Column("digest", digest_type(), nullable=False),
        Column("created_at", UtcDateTime(), nullable=False),
        # When the row may next be claimed; NULL when delivered or dead.
        Column("due_at", UtcDateTime(), nullable=True),
        Column("attempts", Integer, nullable=False, server_default=text("0")),
        Column("lease_token", String(32), nullable=True),
        Column("last_error", long_text(), nullable=True),
        Column("delivered_at", UtcDateTime(), nullable=True),
        Column("receipt", long_text(), nullable=True),
        Column("dead_at", UtcDateTime(), nullable=True),
        Column("compacted_at", UtcDateTime(), nullable=True),
        UniqueConstraint("command_id", name=f"uq_{name}_command_id"),
        Index(
            f"ix_{name}_due_at",
            "due_at",
            postgresql_where=text("due_at IS NOT NULL"),
        ),
        Index(f"ix_{name}_delivered_at", "delivered_at"),
        Index(f"ix_{name}_dead_at", "dead_at"),
    )
    return OutboxTables(metadata, outbox)
