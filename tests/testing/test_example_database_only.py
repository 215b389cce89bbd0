"""X11: the database-only example of docs/testing.md, run by this suite (which opts in
to the plugin in tests/conftest.py) on SQLite and on a PostgreSQL database
the plugin creates for each test, as ``--inboxguard-db`` would."""

from __future__ import annotations

from tests.testing.examples import load, sqlite_and_postgresql

globals().update(load("test_testing_database_only.py"))
inboxguard_database = sqlite_and_postgresql
