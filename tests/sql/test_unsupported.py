"""A database inboxguard does not know is refused, everywhere, with one error.

Nothing falls back to another database's SQL: the registry refuses, and so
does each entry point that used to pick a default (purge, watermark, outbox).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine
from sqlalchemy.dialects import mssql, mysql, oracle, postgresql, sqlite
from sqlalchemy.dialects.mysql.mariadb import MariaDBDialect
from sqlalchemy.engine import Dialect, Engine

import inboxguard
from inboxguard.inbox._purge import plan_purge
from inboxguard.sql.dialects import DATABASES, database_for, inbox_statements_for
from inboxguard.sql.tables import inbox_tables

NOW = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)


@pytest.mark.parametrize("sa_dialect", [mssql.dialect(), oracle.dialect()], ids=["mssql", "oracle"])
def test_the_registry_refuses_a_real_unsupported_dialect(sa_dialect: Dialect) -> None:
    """SQLAlchemy's own SQL Server and Oracle dialects (never connected) are refused,
    and the message names the database and what is supported."""
    with pytest.raises(inboxguard.UnsupportedDialectError) as caught:
        database_for(sa_dialect)
    assert repr(sa_dialect.name) in str(caught.value)
    assert "PostgreSQL, MariaDB/MySQL, SQLite" in str(caught.value)
    with pytest.raises(inboxguard.UnsupportedDialectError):
        inbox_statements_for(sa_dialect, inbox_tables("unsupported_"), None)


@pytest.mark.parametrize(
    ("sa_dialect", "label"),
    [
        (postgresql.dialect(), "PostgreSQL"),
        (mysql.dialect(), "MariaDB/MySQL"),
        (MariaDBDialect(), "MariaDB/MySQL"),
        (sqlite.dialect(), "SQLite"),
    ],
    ids=["postgresql", "mysql", "mariadb", "sqlite"],
)
def test_the_registry_maps_each_supported_name(sa_dialect: Dialect, label: str) -> None:
    """Each supported SQLAlchemy dialect name maps to its own database."""
    assert database_for(sa_dialect).label == label


def test_each_database_declares_whether_it_partitions() -> None:
    """The services ask the database record, not its name: only PostgreSQL
    declares partitioning, and it is the one with a partitioned inbox."""
    declared = {database.label: database.supports_partitioning for database in DATABASES}
    assert declared == {"PostgreSQL": True, "MariaDB/MySQL": False, "SQLite": False}


@pytest.fixture
def unknown_engine(tmp_path: object) -> Iterator[Engine]:
    """A working SQLite engine whose dialect calls itself ``firebird``: any
    statement that ran on it would have been another database's SQL."""
    engine = create_engine(f"sqlite:///{tmp_path}/unknown.db")
    engine.dialect.name = "firebird"
    yield engine
    engine.dispose()


def _tables_in(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.exec_driver_sql("SELECT name FROM sqlite_master").scalars())


def test_purge_refuses_an_unknown_database(unknown_engine: Engine) -> None:
    """Purge (and its dry run) used to fall back to SQLite's statements."""
    box = inboxguard.Inbox(unknown_engine, retention=dt.timedelta(days=1), table_prefix="u_")
    with pytest.raises(inboxguard.UnsupportedDialectError, match="'firebird'"):
        box.purge(now=NOW)
    with pytest.raises(inboxguard.UnsupportedDialectError, match="'firebird'"):
        plan_purge(unknown_engine, box.tables, NOW, None)
    assert _tables_in(unknown_engine) == []


def test_watermark_refuses_an_unknown_database(unknown_engine: Engine) -> None:
    """The watermark advance used to send MariaDB's SQL to anything not PostgreSQL or SQLite."""
    box = inboxguard.Inbox(unknown_engine, retention=dt.timedelta(days=1), table_prefix="u_")
    with unknown_engine.connect() as conn:
        with pytest.raises(inboxguard.UnsupportedDialectError, match="'firebird'"):
            box.advance_watermark(conn, consumer="billing", key="cust-1", position=1)
    assert _tables_in(unknown_engine) == []


def test_outbox_refuses_an_unknown_database(unknown_engine: Engine) -> None:
    """The outbox refuses at construction, before any row could be written."""
    with pytest.raises(inboxguard.UnsupportedDialectError, match="'firebird'"):
        inboxguard.Outbox(unknown_engine, table_prefix="u_")
    with pytest.raises(inboxguard.UnsupportedDialectError, match="'firebird'"):
        inboxguard.Outbox(unknown_engine, table_prefix="u_", notify=True)
