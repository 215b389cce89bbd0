"""inboxguard: the inbox (evidence) and quarantine tables.

Revision ID: ig0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from inboxguard.migrations import BRANCH, table_prefix
from inboxguard.sql.types import UtcDateTime, digest_type, id_type, long_text

revision = "ig0001"
down_revision = None
branch_labels = (BRANCH,)
depends_on = None


def upgrade() -> None:
    """Create ``<prefix>inbox`` and ``<prefix>quarantine``."""
    p = table_prefix()
    op.create_table(
        f"{p}inbox",
        sa.Column("consumer", id_type(), nullable=False),
        sa.Column("command_id", id_type(), nullable=False),
        sa.Column("digest", digest_type(), nullable=False),
        sa.Column("result", long_text(), nullable=True),
        sa.Column("processed_at", UtcDateTime(), nullable=False),
        sa.Column("expires_at", UtcDateTime(), nullable=False),
        sa.Column("result_expires_at", UtcDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("consumer", "command_id", name=f"pk_{p}inbox"),
    )
    op.create_index(f"ix_{p}inbox_expires_at", f"{p}inbox", ["expires_at"])
    op.create_table(
        f"{p}quarantine",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("consumer", id_type(), nullable=False),
        sa.Column("command_id", id_type(), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("incoming_digest", digest_type(), nullable=False),
        sa.Column("stored_digest", digest_type(), nullable=True),
        sa.Column("first_seen_at", UtcDateTime(), nullable=False),
        sa.Column("last_seen_at", UtcDateTime(), nullable=False),
        sa.Column("occurrences", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("details", long_text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=f"pk_{p}quarantine"),
        sa.UniqueConstraint(
            "consumer",
            "command_id",
            "reason",
            "incoming_digest",
            name=f"uq_{p}quarantine_identity",
        ),
    )
    op.create_index(f"ix_{p}quarantine_status", f"{p}quarantine", ["status", "last_seen_at"])


def downgrade() -> None:
    """Drop both tables and every record in them."""
    p = table_prefix()
    op.drop_table(f"{p}quarantine")
    op.drop_table(f"{p}inbox")
