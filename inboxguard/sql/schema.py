"""Whether a service's tables exist where an engine points, checked up front.

Workers call the services' ``check_schema()`` at start so that a database
without the tables refuses to start instead of failing every message.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Table, inspect
from sqlalchemy.engine import Engine

from inboxguard.sql.errors import SchemaHint
from inboxguard.sql.table_text import translated_schema

__all__ = ["check_tables"]


def check_tables(engine: Engine, tables: Sequence[Table], hint: SchemaHint) -> None:
    """Raise the ConfigurationError of ``hint`` naming every table of ``tables``
    missing from the engine's database (in the schema its
    ``schema_translate_map`` points to).

    Raises:
        ConfigurationError: a table does not exist.
    """
    with engine.connect() as conn:
        found = inspect(conn)
        missing = [
            table.name
            for table in tables
            if not found.has_table(table.name, schema=translated_schema(conn, table))
        ]
    if missing:
        raise hint.error(", ".join(missing))
