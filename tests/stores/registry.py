"""Every store of the shared inbox guarantee suite: name -> factory.

A factory takes the pytest request (to reach session fixtures such as
``pg_url``) and is a context manager yielding a
:class:`inboxguard.testing.conformance.StoreHarness` on an isolated store. A new store
is one module beside this one and one line here.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest

from inboxguard.testing.conformance import StoreHarness
from tests.stores.django_store import django_store
from tests.stores.redis_store import redis_store
from tests.stores.sql_async_store import sql_async_store
from tests.stores.sql_store import sql_store

__all__ = ["STORES", "StoreFactory"]

StoreFactory = Callable[[pytest.FixtureRequest], AbstractContextManager[StoreHarness]]

STORES: dict[str, StoreFactory] = {
    **{f"django-{db}": django_store(db) for db in ("sqlite", "postgresql", "mysql")},
    "sql-sqlite": sql_store("sqlite"),
    "sql-postgresql": sql_store("postgresql"),
    "sql-mysql": sql_store("mysql"),
    "sql-async-sqlite": sql_async_store("sqlite"),
    "sql-async-postgresql": sql_async_store("postgresql"),
    "sql-async-mysql": sql_async_store("mysql"),
    "redis": redis_store,
}
