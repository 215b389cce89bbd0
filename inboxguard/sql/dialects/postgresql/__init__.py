"""PostgreSQL (psycopg 3, asyncpg): every statement inboxguard runs on it.

Each module's docstring starts with a *Features* block: :mod:`.inbox` (the
claim in one round trip, ``lock_timeout`` scoped to the claim), :mod:`.outbox`
(one-statement ``SKIP LOCKED`` claim, ``LISTEN``/``NOTIFY``) and :mod:`.purge`
(advisory lock, ``ctid`` batches); :mod:`.partitions` and :mod:`.partitioned`
(the evidence partitioned by expiry, opt-in). The watermark is the shared
``ON CONFLICT`` upsert.
"""

from __future__ import annotations

from inboxguard.sql.dialects.base import Database
from inboxguard.sql.dialects.base.inbox import OnConflictWatermark
from inboxguard.sql.dialects.postgresql.batch import PostgresqlBatch
from inboxguard.sql.dialects.postgresql.inbox import PostgresqlInbox
from inboxguard.sql.dialects.postgresql.outbox import PostgresqlOutbox
from inboxguard.sql.dialects.postgresql.partitioned import PartitionedPostgresqlInbox
from inboxguard.sql.dialects.postgresql.purge import PostgresqlPurge

__all__ = [
    "DATABASE",
    "PartitionedPostgresqlInbox",
    "PostgresqlBatch",
    "PostgresqlInbox",
    "PostgresqlOutbox",
    "PostgresqlPurge",
]

#: PostgreSQL 12 or later (the claim uses ``WITH ... AS MATERIALIZED``).
DATABASE = Database(
    label="PostgreSQL",
    names=("postgresql",),
    inbox=PostgresqlInbox,
    watermark=OnConflictWatermark,
    purge=PostgresqlPurge,
    outbox=PostgresqlOutbox,
    batch=PostgresqlBatch,
    partitioned_inbox=PartitionedPostgresqlInbox,
)
