"""X7: the fixtures in this suite's own run (it opts in in tests/conftest.py),
on the default SQLite database."""

from __future__ import annotations

from sqlalchemy.engine import Engine

import inboxguard
from inboxguard.testing import FakeProvider, FaultKit, ManualClock


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
