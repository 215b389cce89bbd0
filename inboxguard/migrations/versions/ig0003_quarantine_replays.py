"""inboxguard: the audit trail of operator replays of quarantined messages.

Revision ID: ig0003
Revises: ig0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from inboxguard.migrations import table_prefix
from inboxguard.sql.types import UtcDateTime, id_type, long_text

revision = "ig0003"
down_revision = "ig0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``<prefix>quarantine_replays`` and its index."""
    p = table_prefix()
    op.create_table(
        f"{p}quarantine_replays",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("quarantine_id", sa.Integer(), nullable=False),
        sa.Column("consumer", id_type(), nullable=False),
        sa.Column("command_id", id_type(), nullable=False),
        sa.Column("destination", id_type(), nullable=False),
        sa.Column("replayed_by", sa.String(255), nullable=False),
        sa.Column("reason", long_text(), nullable=False),
        sa.Column("replayed_at", UtcDateTime(), nullable=False),
        sa.Column("receipt", long_text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=f"pk_{p}quarantine_replays"),
    )
    op.create_index(
        f"ix_{p}quarantine_replays_qid", f"{p}quarantine_replays", ["quarantine_id", "id"]
    )


def downgrade() -> None:
    """Drop the replay audit trail (every replay recorded in it)."""
    p = table_prefix()
    op.drop_index(f"ix_{p}quarantine_replays_qid", table_name=f"{p}quarantine_replays")
    op.drop_table(f"{p}quarantine_replays")
