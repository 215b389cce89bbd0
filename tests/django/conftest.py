"""Fixtures of the Django store's tests: Django configured once, a store of
each test's own (its own table prefix) on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import unique
from tests.django.support import add_alias, close_all, configure

configure()


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def alias(request: pytest.FixtureRequest) -> Iterator[str]:
    """A Django database alias on each supported database."""
    if request.param == "sqlite":
        name = "default"
    else:
        url = request.getfixturevalue({"postgresql": "pg_url", "mysql": "mysql_url"}[request.param])
        name = add_alias(request.param, url)
    yield name
    close_all()


@pytest.fixture
def make_inbox(alias: str) -> Iterator[Any]:
    """Build DjangoInbox objects with tables of this test's own."""
    from inboxguard.django import DjangoInbox

    made: list[Any] = []

    def make(**options: Any) -> Any:
        options.setdefault("retention", dt.timedelta(days=30))
        options.setdefault("table_prefix", made[0].table_prefix if made else unique("d") + "_")
        box = DjangoInbox(database=alias, **options)
        box.create_schema()
        made.append(box)
        return box

    yield make
    for box in made[:1]:
        box.drop_schema()
    for box in made:
        box.engine.dispose()


@pytest.fixture
def dj_inbox(make_inbox: Any) -> Any:
    """A DjangoInbox with its own tables."""
    return make_inbox()


@pytest.fixture
def ledger(dj_inbox: Any, alias: str) -> Iterator[Any]:
    """The consumer's own table, next to the store's."""
    from tests.django.ledger import Ledger

    book = Ledger(dj_inbox.engine, dj_inbox.table_prefix, alias)
    yield book
    book.drop()
