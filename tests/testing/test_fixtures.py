"""X7: the fixtures in this suite's own run (it opts in in tests/conftest.py),
on the default SQLite database."""

from __future__ import annotations

import pytest
from sqlalchemy import make_url
from sqlalchemy.engine import Engine

import inboxguard
from inboxguard.testing import FakeProvider, FaultKit, ManualClock
from inboxguard.testing._plugin import DB_ENV, _throwaway, server_url


def test_x7_the_fixtures_share_one_throwaway_sqlite_database_and_one_clock(
    inboxguard_database: Engine,
    inboxguard_inbox: inboxguard.Inbox,
    inboxguard_ledger: inboxguard.EffectLedger,
    inboxguard_outbox: inboxguard.Outbox,
    inboxguard_provider: FakeProvider,
    inboxguard_clock: ManualClock,
    inboxguard_kit: FaultKit,
) -> None:
    assert inboxguard_database.dialect.name == "sqlite"
    assert str(inboxguard_database.url.database).endswith("inboxguard.db")
    for part in (inboxguard_inbox, inboxguard_ledger, inboxguard_outbox):
        assert part.engine is inboxguard_database
        assert part.clock is inboxguard_clock
        part.check_schema()  # tables created
    assert inboxguard_provider.clock is inboxguard_clock
    assert inboxguard_provider.contract.idempotency_window == inboxguard_provider.window
    assert inboxguard_kit.ledger is inboxguard_ledger
    assert inboxguard_kit.provider is inboxguard_provider
    before = inboxguard_clock()
    inboxguard_clock.advance(minutes=5)
    assert inboxguard_inbox.clock() - before == inboxguard_ledger.clock() - before


def test_x7_the_server_comes_from_the_option_else_the_environment(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DB_ENV, raising=False)
    assert server_url(request.config) is None  # SQLite
    monkeypatch.setenv(DB_ENV, "postgresql+psycopg://u@h/db")
    assert server_url(request.config) == "postgresql+psycopg://u@h/db"
    monkeypatch.setattr(request.config.option, "inboxguard_db", "mysql+pymysql://root@h/x")
    assert server_url(request.config) == "mysql+pymysql://root@h/x"


def test_x7_a_server_that_is_not_postgresql_or_mariadb_is_refused() -> None:
    with pytest.raises(pytest.UsageError, match="PostgreSQL or MariaDB/MySQL"):
        _throwaway(make_url("sqlite:///x.db"))
