"""The store's tables as Django sees them: their names for the models, and
the DDL the migration runs.

The tables are the library's own (:mod:`inboxguard.sql.tables`), so purge,
the quarantine commands and the outbox dispatcher read what the Django store
writes. The migration creates them with the DDL SQLAlchemy compiles for
Django's database, so their columns, types (UTC datetimes with microseconds,
byte-exact identity collations on MariaDB) and indexes are exactly those of
``Inbox.create_schema()`` and ``Outbox.create_schema()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table
from sqlalchemy.schema import CreateIndex, CreateTable, DropTable

from inboxguard.sql.tables import inbox_tables, outbox_tables

__all__ = ["TableNames", "create_tables", "drop_tables", "store_tables", "table_names"]


@dataclass(frozen=True, slots=True)
class TableNames:
    """The names the models' ``db_table`` take for the configured prefix."""

    inbox: str
    quarantine: str
    outbox: str


def store_tables(prefix: str) -> list[Table]:
    """Every table of the store, in creation order."""
    inbox = inbox_tables(prefix)
    return [
        inbox.inbox,
        inbox.quarantine,
        inbox.watermark,
        inbox.quarantine_replays,
        inbox.quarantine_actions,
        outbox_tables(prefix).outbox,
    ]


def table_names(prefix: str | None = None) -> TableNames:
    """The table names of ``prefix`` (default: ``INBOXGUARD["TABLE_PREFIX"]``)."""
    if prefix is None:
        from inboxguard.django._config import store_settings

        prefix = store_settings(require_retention=False).table_prefix
    inbox = inbox_tables(prefix)
    return TableNames(inbox.inbox.name, inbox.quarantine.name, outbox_tables(prefix).outbox.name)


def create_tables(schema_editor: Any, prefix: str) -> list[str]:
    """Create the store's tables (with their indexes) that the database of
    ``schema_editor`` does not have yet; return the names created."""
    from inboxguard.django._statements import sa_dialect_of

    connection = schema_editor.connection
    dialect = sa_dialect_of(connection)
    with connection.cursor() as cursor:
        existing = set(connection.introspection.table_names(cursor))
    created = []
    for table in store_tables(prefix):
        if table.name in existing:
            continue
        schema_editor.execute(str(CreateTable(table).compile(dialect=dialect)), params=None)
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            schema_editor.execute(str(CreateIndex(index).compile(dialect=dialect)), params=None)
        created.append(table.name)
    return created


def drop_tables(schema_editor: Any, prefix: str) -> None:
    """Drop the store's tables, with every row in them (the migration's reverse)."""
    from inboxguard.django._statements import sa_dialect_of

    connection = schema_editor.connection
    dialect = sa_dialect_of(connection)
    with connection.cursor() as cursor:
        existing = set(connection.introspection.table_names(cursor))
    for table in reversed(store_tables(prefix)):
        if table.name in existing:
            schema_editor.execute(str(DropTable(table).compile(dialect=dialect)), params=None)
