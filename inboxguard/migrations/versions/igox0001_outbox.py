"""inboxguard: the transactional outbox table.

The outbox is optional, so its revisions form a branch of their own,
``inboxguard_outbox``: ``alembic upgrade inboxguard_outbox@head``.

Revision ID: igox0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from inboxguard.migrations import table_prefix
from inboxguard.sql.types import UtcDateTime, digest_type, id_type, long_text

revision = "igox0001"
down_revision = None
branch_labels = ("inboxguard_outbox",)
depends_on = None


def upgrade() -> None:
    """Create ``<prefix>outbox`` with its polling and operations indexes."""
    name = f"{table_prefix()}outbox"
    op.create_table(
        name,
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("command_id", id_type(), nullable=False),
        sa.Column("destination", id_type(), nullable=False),
        sa.Column("payload", long_text(), nullable=True),
        sa.Column("headers", long_text(), nullable=True),
        sa.Column("digest", digest_type(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("due_at", UtcDateTime(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("lease_token", sa.String(32), nullable=True),
        sa.Column("last_error", long_text(), nullable=True),
        sa.Column("delivered_at", UtcDateTime(), nullable=True),
        sa.Column("receipt", long_text(), nullable=True),
        sa.Column("dead_at", UtcDateTime(), nullable=True),
        sa.Column("compacted_at", UtcDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=f"pk_{name}"),
        sa.UniqueConstraint("command_id", name=f"uq_{name}_command_id"),
    )
    op.create_index(
        f"ix_{name}_due_at", name, ["due_at"], postgresql_where=sa.text("due_at IS NOT NULL")
    )
    op.create_index(f"ix_{name}_delivered_at", name, ["delivered_at"])
    op.create_index(f"ix_{name}_dead_at", name, ["dead_at"])


def downgrade() -> None:
    """Drop the outbox table and every row in it."""
    op.drop_table(f"{table_prefix()}outbox")
