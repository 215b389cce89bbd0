"""Hot-path statements must be cacheable, or SQLAlchemy recompiles them per message."""

from __future__ import annotations

import datetime as dt
from collections.abc import Generator
from typing import Any

import pytest

from inboxguard.sql.dialects import DATABASES, Database
from inboxguard.sql.tables import inbox_tables, outbox_tables

HOT = (
    "_claim_stmt",
    "_stored_stmt",
    "_insert_stmt",
    "lookup_stmt",
    "_locking_lookup",
    "store_result_stmt",
)
BY_LABEL = {database.label: database for database in DATABASES}


class _NothingMatched:
    """A statement result that found and changed nothing."""

    rowcount = 0

    def first(self) -> None:
        return None


def _all_steps(steps: Generator[Any, Any, Any]) -> list[Any]:
    """Every statement a sequence runs when no statement matches anything."""
    seen = [next(steps)[0]]
    try:
        while True:
            seen.append(steps.send(_NothingMatched())[0])
    except StopIteration:
        return seen


@pytest.mark.parametrize("label", BY_LABEL)
@pytest.mark.parametrize("lock_timeout", [dt.timedelta(seconds=5), None])
def test_hot_path_statements_have_cache_keys(label: str, lock_timeout: dt.timedelta | None) -> None:
    """Every statement a claim or a result store runs has a compilation cache key
    (sqlalchemy/sqlalchemy#10445 made dialect inserts uncacheable)."""
    dialect = BY_LABEL[label].inbox(inbox_tables("cache_"), lock_timeout)
    found = [name for name in HOT if hasattr(dialect, name)]
    assert "store_result_stmt" in found
    for name in found:
        assert getattr(dialect, name)._generate_cache_key() is not None, name


@pytest.mark.parametrize("label", BY_LABEL)
def test_outbox_add_statement_has_a_cache_key(label: str) -> None:
    """Outbox.add() runs in every producer transaction: its insert must be cacheable."""
    statements = BY_LABEL[label].outbox(outbox_tables("cache_"))
    assert statements.insert()._generate_cache_key() is not None


@pytest.mark.parametrize("label", BY_LABEL)
def test_watermark_statements_are_cacheable(label: str) -> None:
    """Advancing a watermark per message never recompiles its SQL (sqlalchemy#10445)."""
    database: Database = BY_LABEL[label]
    watermark = database.watermark(inbox_tables("wmcache_").watermark)
    values = {"consumer": "c", "key": "k", "position": 1, "updated_at": None}
    statements = _all_steps(watermark.advance(values))
    assert statements
    for stmt in statements:
        assert stmt._generate_cache_key() is not None
