"""inboxguard: the audit trail of operator releases and resolutions of
quarantine records.

Revision ID: ig0004
Revises: ig0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from inboxguard.migrations import table_prefix
from inboxguard.sql.types import UtcDateTime, digest_type, id_type, long_text

revision = "ig0004"
down_revision = "ig0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``<prefix>quarantine_actions`` and its index."""
    p = table_prefix()
    op.create_table(
        f"{p}quarantine_actions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("quarantine_id", sa.Integer(), nullable=False),
        sa.Column("consumer", id_type(), nullable=False),
        sa.Column("command_id", id_type(), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("reason", long_text(), nullable=False),
        sa.Column("acted_at", UtcDateTime(), nullable=False),
        sa.Column("evidence_digest", digest_type(), nullable=True),
        sa.Column("evidence_processed_at", UtcDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=f"pk_{p}quarantine_actions"),
    )
    op.create_index(
        f"ix_{p}quarantine_actions_qid", f"{p}quarantine_actions", ["quarantine_id", "id"]
    )


def downgrade() -> None:
    """Drop the action audit trail (every release and resolution recorded in it)."""
    p = table_prefix()
    op.drop_index(f"ix_{p}quarantine_actions_qid", table_name=f"{p}quarantine_actions")
    op.drop_table(f"{p}quarantine_actions")
