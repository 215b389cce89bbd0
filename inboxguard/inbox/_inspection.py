"""Read-only views of the inbox for operators and tests, mixed into
:class:`inboxguard.Inbox`."""

from __future__ import annotations

import json

from sqlalchemy import select
from sqlalchemy.engine import Engine

from inboxguard.inbox import _quarantine
from inboxguard.inbox._records import InboxRecord, QuarantineRecord
from inboxguard.sql.schema import InboxTables

__all__ = ["Inspection"]


class Inspection:
    """Quarantine records and committed evidence."""

    engine: Engine
    tables: InboxTables

    def quarantined(
        self, consumer: str | None = None, *, status: str | None = "open"
    ) -> list[QuarantineRecord]:
        """Return quarantine records (open ones by default), oldest first."""
        return _quarantine.read_quarantine(self.engine, self.tables, consumer, status)

    def resolve_quarantine(self, record_id: int) -> bool:
        """Mark an open quarantine record resolved; False if none is open with that id."""
        return _quarantine.resolve_quarantine(self.engine, self.tables, record_id)

    def lookup(self, consumer: str, command_id: str) -> InboxRecord | None:
        """Return the committed evidence of a command, or None."""
        inbox = self.tables.inbox
        stmt = select(inbox).where(inbox.c.consumer == consumer, inbox.c.command_id == command_id)
        with self.engine.connect() as conn:
            row = conn.execute(stmt).mappings().first()
        if row is None:
            return None
        result = json.loads(row["result"]) if row["result"] is not None else None
        return InboxRecord(**{**row, "result": result})
