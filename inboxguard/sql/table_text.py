"""SQL text that names inboxguard's tables the way SQLAlchemy Core does.

The hot-path statements are SQL text, because SQLAlchemy 2.0 does not cache
the compiled form of its dialect-specific ``insert()`` constructs
(sqlalchemy/sqlalchemy#10445). Plain ``text()`` would name a table by a bare
string, which two things SQLAlchemy does for every Core statement never reach:

- quoting: a name that needs quotes (``Ab_inbox`` on PostgreSQL) is quoted
  the way ``create_schema()`` quoted it when it created the table;
- schema translation: a connection's ``schema_translate_map`` (a schema per
  tenant) puts the table in the tenant's schema.

:func:`table_text` writes a table as a ``{field}`` in the text and renders it
at compile time with the dialect's identifier preparer, exactly as Core
renders a :class:`~sqlalchemy.schema.Table`. SQLAlchemy compiles a
statement once per cache key and fills in the translated schema names at
execution time, so the statement stays cached and serves every tenant.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import TextClause
from sqlalchemy.sql.visitors import InternalTraversal

__all__ = ["TableText", "schema_options", "table_text", "translated_schema"]


class TableText(TextClause):
    """A :class:`~sqlalchemy.sql.expression.TextClause` whose ``{field}``
    placeholders are tables, rendered quoted and schema-translated."""

    inherit_cache = True
    _traverse_internals = [  # noqa: RUF012 - SQLAlchemy reads it per class
        *TextClause._traverse_internals,  # noqa: SLF001 - extends it
        ("_table_names", InternalTraversal.dp_plain_obj),
    ]

    _tables: tuple[tuple[str, Table], ...]
    _table_names: tuple[tuple[str, str | None, str], ...]

    def __init__(self, sql: str, tables: dict[str, Table]) -> None:
        super().__init__(sql)
        self._tables = tuple((f"{{{field}}}", table) for field, table in tables.items())
        # What the rendering depends on; part of the compiled-cache key.
        self._table_names = tuple(
            (field, table.schema, table.name) for field, table in self._tables
        )


def table_text(sql: str, **tables: Table) -> TableText:
    """SQL text in which ``{name}`` stands for the table passed as ``name=``.

    Example: ``table_text("DELETE FROM {inbox} WHERE ...", inbox=tables.inbox)``.
    Bind parameters are written ``:name``, as in :func:`sqlalchemy.text`.
    """
    for field in tables:
        if f"{{{field}}}" not in sql:
            msg = f"table {field!r} is not used in {sql!r}"
            raise ValueError(msg)
    return TableText(sql, tables)


@compiles(TableText)
def _render(element: TableText, compiler: SQLCompiler, **kw: Any) -> str:
    """Compile as text, then put each table's name in: quoted where the
    database needs it, with the (translated) schema in front when it has one."""
    sql: str = compiler.visit_textclause(element, **kw)  # type: ignore[no-untyped-call]
    for placeholder, table in element._tables:  # noqa: SLF001 - our own class
        sql = sql.replace(placeholder, compiler.preparer.format_table(table))
    return sql


def translated_schema(conn: Connection, table: Table) -> str | None:
    """The schema ``table`` lives in on ``conn``: its own, or where the
    connection's ``schema_translate_map`` sends it (None: the default schema)."""
    mapping = conn.get_execution_options().get("schema_translate_map") or {}
    schema: str | None = mapping.get(table.schema, table.schema)
    return schema


def schema_options(conn: Connection) -> dict[str, Any]:
    """The execution options that put a statement in the same schemas as
    ``conn`` (its ``schema_translate_map``), for a write on another connection."""
    mapping = conn.get_execution_options().get("schema_translate_map")
    return {} if not mapping else {"schema_translate_map": mapping}
