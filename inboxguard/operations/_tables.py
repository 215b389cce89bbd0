"""Which of inboxguard's tables exist where an engine points, read once."""

from __future__ import annotations

from sqlalchemy import Table, inspect
from sqlalchemy.engine import Engine

from inboxguard.sql.table_text import translated_schema

__all__ = ["present_tables"]


def present_tables(engine: Engine, *tables: Table) -> set[str]:
    """The names of ``tables`` that exist, each looked up in the schema the
    engine's ``schema_translate_map`` sends it to (a schema per tenant)."""
    with engine.connect() as conn:
        found = inspect(conn)
        return {
            t.name for t in tables if found.has_table(t.name, schema=translated_schema(conn, t))
        }
