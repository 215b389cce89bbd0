"""What the PostgreSQL catalogs say about a partitioned inbox table, read in
one query: its kind, its DEFAULT partition, and which attached partitions
lack the unique ``(consumer, command_id)`` index.

A partitioned table cannot carry that unique index itself (its key would
have to include ``expires_at``), so each partition carries its own. A
partition attached by hand, or restored without its indexes, has none, and
could store the same command twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, text

__all__ = ["LayoutFacts", "Unindexed", "read_layout"]


@dataclass(frozen=True, slots=True)
class Unindexed:
    """A partition without a usable unique index on (consumer, command_id)."""

    #: Its bare name (the index created for it is ``<name>_key``).
    name: str
    #: Its name as SQL: quoted, and schema-qualified unless on the search path.
    sql: str
    #: ``<name>_key`` is already taken, by an index that does not qualify
    #: (e.g. left invalid by a failed ``CREATE INDEX CONCURRENTLY``).
    key_name_taken: bool


@dataclass(frozen=True, slots=True)
class LayoutFacts:
    """The inbox table's layout as the catalogs hold it."""

    #: The partitioned table's name as SQL (quoted, schema-qualified if in a schema).
    parent: str
    #: The expected DEFAULT partition's name as SQL (``<inbox>_default``).
    expected_default: str
    #: False: a plain table (the layout checks stop there).
    partitioned: bool
    #: The attached DEFAULT partition as SQL (None: there is none).
    default: str | None
    #: The DEFAULT partition is the table the inbox expects (``<inbox>_default``).
    default_is_expected: bool
    #: A table named as the expected DEFAULT partition exists (attached or not).
    default_table_exists: bool
    #: Every attached partition, DEFAULT included, lacking the unique index.
    unindexed: tuple[Unindexed, ...]


#: A unique, valid, ready, non-partial index whose key columns are exactly
#: consumer and command_id (in either order; INCLUDE columns allowed).
_KEYED = (
    "EXISTS (SELECT 1 FROM pg_index x WHERE x.indrelid = c.oid AND x.indisunique"
    " AND x.indisvalid AND x.indisready AND x.indpred IS NULL AND x.indexprs IS NULL"
    " AND x.indnkeyatts = 2 AND (SELECT array_agg(a.attname::text ORDER BY a.attname)"
    " FROM unnest(x.indkey) WITH ORDINALITY AS k(attnum, n)"
    " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum"
    " WHERE k.n <= x.indnkeyatts) = ARRAY['command_id', 'consumer'])"
)

_LAYOUT_SQL = (
    "SELECT p.relkind, d.oid::regclass::text AS default_sql,"
    " d.oid IS NOT NULL AND d.oid = to_regclass(:default) AS default_is_expected,"
    " to_regclass(:default) IS NOT NULL AS default_table_exists,"
    f" c.relname, c.oid::regclass::text AS part_sql, {_KEYED} AS keyed,"
    " EXISTS (SELECT 1 FROM pg_class n WHERE n.relnamespace = c.relnamespace"
    " AND n.relname = c.relname || '_key') AS key_name_taken"
    " FROM pg_class p"
    " LEFT JOIN pg_partitioned_table pt ON pt.partrelid = p.oid"
    " LEFT JOIN pg_class d ON d.oid = NULLIF(pt.partdefid, 0)"
    " LEFT JOIN pg_inherits i ON i.inhparent = p.oid"
    " LEFT JOIN pg_class c ON c.oid = i.inhrelid"
    " WHERE p.oid = to_regclass(:parent)"
    " ORDER BY c.relname"
)


def read_layout(conn: Connection, parent: str, default: str) -> LayoutFacts | None:
    """The layout of the table ``parent`` (quoted, schema-qualified SQL
    name), whose DEFAULT partition should be ``default`` (same form); None
    when the table does not exist. Ends the read's transaction."""
    rows = conn.execute(text(_LAYOUT_SQL), {"parent": parent, "default": default}).all()
    conn.rollback()
    if not rows:
        return None
    first = rows[0]
    unindexed = tuple(
        Unindexed(row.relname, row.part_sql, bool(row.key_name_taken))
        for row in rows
        if row.relname is not None and not row.keyed
    )
    return LayoutFacts(
        parent=parent,
        expected_default=default,
        partitioned=first.relkind == "p",
        default=first.default_sql,
        default_is_expected=bool(first.default_is_expected),
        default_table_exists=bool(first.default_table_exists),
        unindexed=unindexed,
    )
