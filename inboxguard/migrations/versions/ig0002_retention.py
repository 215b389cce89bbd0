"""inboxguard: the watermark table and the result-expiry index purge compacts by.

Revision ID: ig0002
Revises: ig0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from inboxguard.migrations import table_prefix
from inboxguard.sql.types import UtcDateTime, id_type

revision = "ig0002"
down_revision = "ig0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``<prefix>watermark`` and ``ix_<prefix>inbox_result_expires_at``."""
    p = table_prefix()
    has_ttl = sa.column("result_expires_at").is_not(None)
    op.create_index(
        f"ix_{p}inbox_result_expires_at",
        f"{p}inbox",
        ["result_expires_at"],
        postgresql_where=has_ttl,
        sqlite_where=has_ttl,
    )
    op.create_table(
        f"{p}watermark",
        sa.Column("consumer", id_type(), nullable=False),
        sa.Column("key", id_type(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("consumer", "key", name=f"pk_{p}watermark"),
    )


def downgrade() -> None:
    """Drop the watermark table (every watermark in it) and the index."""
    p = table_prefix()
    op.drop_table(f"{p}watermark")
    op.drop_index(f"ix_{p}inbox_result_expires_at", table_name=f"{p}inbox")
