"""G14: every table prefix that passes validation works; a longer one is refused.

The longest allowed prefix and a mixed-case one create their tables and guard
messages (fresh, duplicate, quarantined mismatch), advance a watermark, purge
and add to the outbox on PostgreSQL, MariaDB and SQLite.
"""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy.engine import Engine

from inboxguard import ConfigurationError, EffectLedger, Inbox, Outbox, PayloadMismatchError
from inboxguard.sql.tables import MAX_PREFIX_LENGTH, inbox_tables
from tests.conftest import FakeClock, unique


def _longest() -> str:
    return unique("L").ljust(MAX_PREFIX_LENGTH - 1, "x") + "_"


def _mixed() -> str:
    return "Ab" + unique("Cd") + "_"


@pytest.mark.parametrize("make", [_longest, _mixed], ids=["longest", "mixed-case"])
def test_g14_allowed_prefix_creates_and_guards(
    engine: Engine, clock: FakeClock, make: object
) -> None:
    """create_schema() succeeds and every statement finds the tables."""
    prefix = make()  # type: ignore[operator]
    inbox = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix, clock=clock)
    outbox = Outbox(engine, table_prefix=prefix, clock=clock)
    ledger = EffectLedger(engine, table_prefix=prefix, clock=clock)
    for part in (inbox, outbox, ledger):
        part.create_schema()
    try:
        for expected in (False, True):
            with engine.connect() as conn, conn.begin():
                with inbox.guard(conn, consumer="c", command_id="cmd-1", payload={"n": 1}) as e:
                    assert e.duplicate is expected
                    if not e.duplicate:
                        e.result = "done"
                assert inbox.advance_watermark(conn, consumer="c", key="k", position=1) is (
                    not expected
                )
                assert outbox.add(conn, command_id="out-1", destination="q", payload={}) is (
                    not expected
                )
        with (
            engine.connect() as conn,
            conn.begin(),
            pytest.raises(PayloadMismatchError),
            inbox.guard(conn, consumer="c", command_id="cmd-1", payload={"n": 2}),
        ):
            pass
        assert len(inbox.quarantined()) == 1
        clock.advance(dt.timedelta(days=2))
        assert inbox.purge().deleted == 1
        assert outbox.status().backlog == 1
    finally:
        for part in (inbox, outbox, ledger):
            part.drop_schema()


def test_g14_too_long_prefix_is_refused_naming_the_limit() -> None:
    """One character over the bound: refused by the inbox, outbox and ledger alike."""
    too_long = "x" * MAX_PREFIX_LENGTH + "_"
    assert len(too_long) == MAX_PREFIX_LENGTH + 1
    for make in (
        lambda: inbox_tables(too_long),
        lambda: Inbox(_sqlite(), retention=dt.timedelta(days=1), table_prefix=too_long),
        lambda: Outbox(_sqlite(), table_prefix=too_long),
        lambda: EffectLedger(_sqlite(), table_prefix=too_long),
    ):
        with pytest.raises(ConfigurationError, match=f"at most {MAX_PREFIX_LENGTH} fit.*63"):
            make()


def test_g14_bound_is_the_longest_derived_name() -> None:
    """The bound leaves room for exactly the longest index or constraint name."""
    tables = inbox_tables("p" * MAX_PREFIX_LENGTH)
    names = [index.name for index in tables.inbox.indexes]
    assert max(len(str(name)) for name in names) == 63


def _sqlite() -> Engine:
    from sqlalchemy import create_engine

    return create_engine("sqlite://")
