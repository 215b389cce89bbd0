"""SQLite (pysqlite, aiosqlite): every statement inboxguard runs on it.

Each module's docstring starts with a *Features* block: :mod:`.inbox` (read
first, then ``INSERT ... ON CONFLICT DO NOTHING``), :mod:`.outbox` (one
``UPDATE ... RETURNING`` claim, one dispatcher per database) and
:mod:`.purge` (``rowid`` batches, no lock). The watermark is the shared
``ON CONFLICT`` upsert.
"""

from __future__ import annotations

from inboxguard.sql.dialects.base import Database
from inboxguard.sql.dialects.base.inbox import OnConflictWatermark
from inboxguard.sql.dialects.sqlite.batch import SqliteBatch
from inboxguard.sql.dialects.sqlite.inbox import SqliteInbox
from inboxguard.sql.dialects.sqlite.outbox import SqliteOutbox
from inboxguard.sql.dialects.sqlite.purge import SqlitePurge

__all__ = ["DATABASE", "SqliteBatch", "SqliteInbox", "SqliteOutbox", "SqlitePurge"]

#: SQLite 3.35 or later (``RETURNING``).
DATABASE = Database(
    label="SQLite",
    names=("sqlite",),
    inbox=SqliteInbox,
    watermark=OnConflictWatermark,
    purge=SqlitePurge,
    outbox=SqliteOutbox,
    batch=SqliteBatch,
)
