"""X7: the plain example of docs/testing.md, run by this suite (which opts in
to the plugin in tests/conftest.py) on the default SQLite database."""

from __future__ import annotations

from tests.testing.examples import load

globals().update(load("test_testing_plain.py"))
