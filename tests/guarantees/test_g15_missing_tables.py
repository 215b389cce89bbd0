"""G15: a database without the tables is refused with a ConfigurationError
that says how to create them (``create_schema()`` or the Alembic branch),
never a raw driver error; ``check_schema()`` tells it up front."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy.engine import Engine

from inboxguard import ConfigurationError, EffectLedger, Inbox, Outbox
from inboxguard.outbox import Dispatcher
from integrations.ledger.gateway import SandboxGateway


def _refused(branch: str, create: str) -> pytest.RaisesContext[ConfigurationError]:
    return pytest.raises(
        ConfigurationError, match=rf"tables are missing.*{create}.*upgrade {branch}@head"
    )


def test_g15_inbox_without_tables(engine: Engine, prefix: str) -> None:
    """guard, lookup, purge, watermark and check_schema() name the fix."""
    inbox = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    with _refused("inboxguard", r"Inbox\.create_schema\(\)"):
        inbox.check_schema()
    with engine.connect() as conn, conn.begin():
        with (
            _refused("inboxguard", r"Inbox\.create_schema\(\)") as info,
            inbox.guard(conn, consumer="c", command_id="cmd", payload={}),
        ):
            pytest.fail("the block must not run")
        assert info.value.__cause__ is None  # no driver error or SQL dump attached
    with engine.connect() as conn, conn.begin(), _refused("inboxguard", "create_schema"):
        inbox.advance_watermark(conn, consumer="c", key="k", position=1)
    with _refused("inboxguard", "create_schema"):
        inbox.lookup("c", "cmd")
    with _refused("inboxguard", "create_schema"):
        inbox.purge()
    inbox.create_schema()
    try:
        inbox.check_schema()  # passes once the tables exist
    finally:
        inbox.drop_schema()


def test_g15_outbox_without_its_table(engine: Engine, prefix: str) -> None:
    """add, a dispatch pass and check_schema() name the fix."""
    outbox = Outbox(engine, table_prefix=prefix)
    with _refused("inboxguard_outbox", r"Outbox\.create_schema\(\)"):
        outbox.check_schema()
    with (
        engine.connect() as conn,
        conn.begin(),
        _refused("inboxguard_outbox", r"Outbox\.create_schema\(\)"),
    ):
        outbox.add(conn, command_id="cmd", destination="q", payload={})
    with (
        Dispatcher(outbox, lambda message: None) as dispatcher,
        _refused("inboxguard_outbox", "create_schema"),
    ):
        dispatcher.run_once()
    outbox.create_schema()
    try:
        outbox.check_schema()
    finally:
        outbox.drop_schema()


def test_g15_ledger_without_its_tables(engine: Engine, prefix: str) -> None:
    """execute, get and check_schema() name the fix."""
    ledger = EffectLedger(engine, table_prefix=prefix)
    gateway = SandboxGateway(engine, table_prefix=prefix + "gw_")
    gateway.create_schema()
    try:
        with _refused("inboxguard_effects", r"EffectLedger\.create_schema\(\)"):
            ledger.check_schema()
        with _refused("inboxguard_effects", "create_schema"):
            ledger.execute("pay-1", gateway, {"amount": 1})
        with _refused("inboxguard_effects", "create_schema"):
            ledger.get("pay-1")
        assert gateway.requests() == 0  # nothing was sent
        ledger.create_schema()
        ledger.check_schema()
        ledger.drop_schema()
    finally:
        gateway.drop_schema()
