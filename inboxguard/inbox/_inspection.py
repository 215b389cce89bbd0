"""The committed evidence of one command, read for operators and tests."""

from __future__ import annotations

import json

from sqlalchemy import select
from sqlalchemy.engine import Engine

from inboxguard.inbox._records import InboxRecord
from inboxguard.sql.errors import INBOX_SCHEMA, schema_required
from inboxguard.sql.tables import InboxTables

__all__ = ["lookup_evidence"]


def lookup_evidence(
    engine: Engine, tables: InboxTables, consumer: str, command_id: str
) -> InboxRecord | None:
    """Return the committed evidence of a command, or None."""
    inbox = tables.inbox
    stmt = select(inbox).where(inbox.c.consumer == consumer, inbox.c.command_id == command_id)
    with schema_required(INBOX_SCHEMA), engine.connect() as conn:
        row = conn.execute(stmt).mappings().first()
    if row is None:
        return None
    result = json.loads(row["result"]) if row["result"] is not None else None
    return InboxRecord(**{**row, "result": result})
