"""The column types every inboxguard table is built from.

Column types are chosen so that every supported database compares identities
exactly: on MariaDB/MySQL, IDs use a binary collation (the default collations
fold case, which would make ``"A-1"`` and ``"a-1"`` one command).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import DateTime, String, Text
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

__all__ = [
    "DIGEST_LENGTH",
    "NAMING_CONVENTION",
    "UtcDateTime",
    "digest_type",
    "id_type",
    "long_text",
]

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
