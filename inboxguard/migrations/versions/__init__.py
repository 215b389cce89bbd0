"""Frozen Alembic revisions of inboxguard's tables (branch ``inboxguard``)."""
