"""Hot-path statements must be cacheable, or SQLAlchemy recompiles them per message."""

from __future__ import annotations

import datetime as dt

import pytest

from inboxguard.sql.dialects.mysql import MysqlDialect
from inboxguard.sql.dialects.postgresql import PostgresqlDialect
from inboxguard.sql.dialects.sqlite import SqliteDialect
from inboxguard.sql.schema import inbox_tables

HOT = ("_claim_stmt", "_insert_stmt", "lookup_stmt", "_locking_lookup", "store_result_stmt")


@pytest.mark.parametrize("cls", [PostgresqlDialect, MysqlDialect, SqliteDialect])
@pytest.mark.parametrize("lock_timeout", [dt.timedelta(seconds=5), None])
def test_hot_path_statements_have_cache_keys(cls: type, lock_timeout: dt.timedelta | None) -> None:
    """Every statement a claim or a result store runs has a compilation cache key
    (sqlalchemy/sqlalchemy#10445 made dialect inserts uncacheable)."""
    dialect = cls(inbox_tables("cache_"), lock_timeout)
    found = [name for name in HOT if hasattr(dialect, name)]
    assert "store_result_stmt" in found
    for name in found:
        assert getattr(dialect, name)._generate_cache_key() is not None, name


@pytest.mark.parametrize("name", ["postgresql", "mysql", "sqlite"])
def test_outbox_add_statement_has_a_cache_key(name: str) -> None:
    """Outbox.add() runs in every producer transaction: its insert must be cacheable."""
    from sqlalchemy.dialects import mysql, postgresql, sqlite

    from inboxguard.sql._outbox.statements import statements_for
    from inboxguard.sql.outbox_tables import outbox_tables

    sa_dialect = {"postgresql": postgresql, "mysql": mysql, "sqlite": sqlite}[name].dialect()
    statements = statements_for(sa_dialect, outbox_tables("cache_"))
    assert statements.insert()._generate_cache_key() is not None
