"""The inbox's tables and the column types, under their former module name.

The tables live in :mod:`inboxguard.sql.tables`, the column types in
:mod:`inboxguard.sql.types`; this module re-exports them for existing imports.
"""

from __future__ import annotations

from inboxguard.sql.tables import InboxTables, inbox_tables
from inboxguard.sql.types import (
    DIGEST_LENGTH,
    NAMING_CONVENTION,
    UtcDateTime,
    digest_type,
    id_type,
    long_text,
)

__all__ = [
    "DIGEST_LENGTH",
    "NAMING_CONVENTION",
    "InboxTables",
    "UtcDateTime",
    "digest_type",
    "id_type",
    "inbox_tables",
    "long_text",
]
