"""The inbox's tables, as SQLAlchemy Core, on one MetaData per table prefix.

Column types are chosen so that every supported database compares identities
exactly: on MariaDB/MySQL, IDs use a binary collation (the default collations
fold case, which would make ``"A-1"`` and ``"a-1"`` one command).
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

__all__ = ["NAMING_CONVENTION", "InboxTables", "UtcDateTime", "id_type", "inbox_tables"]

#: Stable constraint names, so that Alembic autogenerate never renames them.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

#: Width of a stored digest: ``"sha256:"`` plus 64 hex digits.
DIGEST_LENGTH = 71


class UtcDateTime(TypeDecorator[dt.datetime]):
    """Timezone-aware datetimes stored as UTC with microseconds on every database.

    Naive values are refused on the way in, so no local time is ever stored.
    """

    impl = DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """Use DATETIME(6) on MySQL/MariaDB, whose default drops microseconds."""
        if dialect.name in {"mysql", "mariadb"}:
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(DateTime(timezone=False))

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        """Convert an aware datetime to naive UTC for storage."""
        if value is None:
            return None
        if value.utcoffset() is None:
            msg = f"naive datetime {value!r} cannot be stored; attach a timezone"
            raise ValueError(msg)
        return value.astimezone(dt.UTC).replace(tzinfo=None)

    def process_result_value(
        self, value: dt.datetime | None, dialect: Dialect
    ) -> dt.datetime | None:
        """Attach UTC to what the database returns."""
        return None if value is None else value.replace(tzinfo=dt.UTC)


def id_type() -> TypeEngine[str]:
    """A 255-character identity column compared byte for byte on every database."""
    exact = mysql.VARCHAR(255, charset="utf8mb4", collation="utf8mb4_bin")
    return String(255).with_variant(exact, "mysql", "mariadb")


def digest_type() -> TypeEngine[str]:
    """A digest column (ASCII, exact comparison)."""
    exact = mysql.VARCHAR(DIGEST_LENGTH, charset="ascii", collation="ascii_bin")
    return String(DIGEST_LENGTH).with_variant(exact, "mysql", "mariadb")


def long_text() -> TypeEngine[str]:
    """Text large enough for a stored result or quarantined message."""
    return Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")


@dataclass(frozen=True, slots=True)
class InboxTables:
    """The tables of one prefix: ``inbox`` (evidence) and ``quarantine``."""

    metadata: MetaData
    inbox: Table
    quarantine: Table


@functools.cache
def inbox_tables(prefix: str) -> InboxTables:
    """Return the (cached) tables for ``prefix``; one MetaData per prefix."""
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    inbox = Table(
        f"{prefix}inbox",
        metadata,
        Column("consumer", id_type(), nullable=False),
        Column("command_id", id_type(), nullable=False),
        Column("digest", digest_type(), nullable=False),
        Column("result", long_text(), nullable=True),
        Column("processed_at", UtcDateTime(), nullable=False),
        Column("expires_at", UtcDateTime(), nullable=False),
        Column("result_expires_at", UtcDateTime(), nullable=True),
        PrimaryKeyConstraint("consumer", "command_id"),
        Index(f"ix_{prefix}inbox_expires_at", "expires_at"),
    )
    # Purge's compaction step finds results past result_ttl through this index;
    # partial where the database allows, so inboxes without a result_ttl pay nothing.
    has_ttl = inbox.c.result_expires_at.is_not(None)
    Index(
        f"ix_{prefix}inbox_result_expires_at",
        inbox.c.result_expires_at,
        postgresql_where=has_ttl,
        sqlite_where=has_ttl,
    )
    quarantine = Table(
        f"{prefix}quarantine",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("consumer", id_type(), nullable=False),
        Column("command_id", id_type(), nullable=False),
        Column("reason", String(64), nullable=False),
        Column("incoming_digest", digest_type(), nullable=False),
        Column("stored_digest", digest_type(), nullable=True),
        Column("first_seen_at", UtcDateTime(), nullable=False),
        Column("last_seen_at", UtcDateTime(), nullable=False),
        Column("occurrences", Integer, nullable=False),
        Column("status", String(16), nullable=False),
        Column("details", long_text(), nullable=True),
        UniqueConstraint(
            "consumer",
            "command_id",
            "reason",
            "incoming_digest",
            name=f"uq_{prefix}quarantine_identity",
        ),
        Index(f"ix_{prefix}quarantine_status", "status", "last_seen_at"),
    )
    return InboxTables(metadata, inbox, quarantine)
