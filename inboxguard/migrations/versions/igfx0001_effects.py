"""inboxguard: the effect ledger's tables (effects and their append-only history).

The ledger is optional, so its revisions form a branch of their own,
``inboxguard_effects``: ``alembic upgrade inboxguard_effects@head``.

Revision ID: igfx0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from inboxguard.migrations import table_prefix
from inboxguard.sql.types import UtcDateTime, digest_type, id_type, long_text

revision = "igfx0001"
down_revision = None
branch_labels = ("inboxguard_effects",)
depends_on = None


def upgrade() -> None:
    """Create ``<prefix>effects`` and ``<prefix>effect_history``."""
    p = table_prefix()
    op.create_table(
        f"{p}effects",
        sa.Column("effect_key", id_type(), nullable=False),
        sa.Column("provider", sa.String(255), nullable=False),
        sa.Column("digest", digest_type(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("fencing_token", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(255), nullable=True),
        sa.Column("lease_expires_at", UtcDateTime(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("applied", sa.Boolean(), nullable=True),
        sa.Column("receipt_reference", sa.String(255), nullable=True),
        sa.Column("receipt_details", long_text(), nullable=True),
        sa.Column("compensation_reference", sa.String(255), nullable=True),
        sa.Column("compensation_details", long_text(), nullable=True),
        sa.Column("last_error", long_text(), nullable=True),
        sa.Column("first_sent_at", UtcDateTime(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("effect_key", name=f"pk_{p}effects"),
    )
    op.create_index(f"ix_{p}effects_state", f"{p}effects", ["state", "updated_at"])
    op.create_table(
        f"{p}effect_history",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("effect_key", id_type(), nullable=False),
        sa.Column("from_state", sa.String(16), nullable=True),
        sa.Column("to_state", sa.String(16), nullable=False),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("fencing_token", sa.Integer(), nullable=False),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("at", UtcDateTime(), nullable=False),
        sa.Column("note", long_text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=f"pk_{p}effect_history"),
    )
    op.create_index(f"ix_{p}effect_history_key", f"{p}effect_history", ["effect_key", "id"])


def downgrade() -> None:
    """Drop the ledger's tables."""
    p = table_prefix()
    op.drop_index(f"ix_{p}effect_history_key", table_name=f"{p}effect_history")
    op.drop_table(f"{p}effect_history")
    op.drop_index(f"ix_{p}effects_state", table_name=f"{p}effects")
    op.drop_table(f"{p}effects")
