"""BT7-BT9: bad input, transaction-boundary misuse and tenant schemas for guard_batch."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import (
    BatchCommand,
    ConfigurationError,
    Inbox,
    InvalidCommandError,
    PayloadEncodingError,
)
from tests.conftest import FakeClock
from tests.guarantees.test_g13_tenants import Tenants, _inboxes, tenants  # noqa: F401 - fixture
from tests.helpers import apply, count
from tests.inbox.batch.conftest import Setup

MISTAKE = "committed or rolled back inside the guarded block"


@pytest.mark.parametrize(
    ("commands", "message"),
    [
        ("abc", "commands must be an iterable"),
        (42, "commands must be an iterable"),
        ([("a", {}), 7], r"commands\[1\] must be a \(command_id, payload\) pair"),
        ([("a", {}, "extra")], r"commands\[0\] .* a tuple of 3"),
    ],
)
def test_bt7_commands_of_another_shape_are_refused(
    setup: Setup, commands: object, message: str
) -> None:
    """A string, a number or an element that is no pair is refused, naming the
    element and the fix; nothing is written."""
    with pytest.raises(ConfigurationError, match=message), Session(setup.engine) as session:
        with setup.inbox.guard_batch(session, consumer="c", commands=commands):  # type: ignore[arg-type]
            pytest.fail("the block must not run")
    assert count(setup.engine, setup.inbox.tables.inbox) == 0


def test_bt7_bad_ids_and_payloads_name_their_index(setup: Setup) -> None:
    """A bad command ID (empty, padded, a str subclass, None, too long), an
    unencodable payload or a naive ``sent_at`` anywhere refuses the whole
    batch before any I/O, naming its index; so does a bad consumer."""

    class Tag(str):
        __slots__ = ()

    bad_ids: list[object] = ["", " padded", Tag("t"), None, "x" * 256]
    for bad in bad_ids:
        with pytest.raises(InvalidCommandError, match=r"commands\[1\]\.command_id"):
            with Session(setup.engine) as session:
                cmds = [("ok", {}), BatchCommand(bad, {})]  # type: ignore[arg-type]
                with setup.inbox.guard_batch(session, consumer="c", commands=cmds):
                    pytest.fail("the block must not run")
    with pytest.raises(PayloadEncodingError, match=r"commands\[2\]") as raised:
        with Session(setup.engine) as session:
            cmds = [("a", {}), ("b", {}), ("c", {"when": object()})]
            with setup.inbox.guard_batch(session, consumer="c", commands=cmds):
                pytest.fail("the block must not run")
    assert raised.value.path.startswith("commands[2].")
    naive = BatchCommand("n", {}, sent_at=dt.datetime(2026, 1, 1))  # naive: the mistake
    with pytest.raises(ConfigurationError, match=r"commands\[1\]\.sent_at"):
        with Session(setup.engine) as session:
            with setup.inbox.guard_batch(session, consumer="c", commands=[("a", {}), naive]):
                pytest.fail("the block must not run")
    with pytest.raises(InvalidCommandError, match="consumer"), Session(setup.engine) as session:
        with setup.inbox.guard_batch(session, consumer="", commands=[("a", {})]):
            pytest.fail("the block must not run")
    assert count(setup.engine, setup.inbox.tables.inbox) == 0
    assert setup.inbox.quarantined() == []


def test_bt8_autocommit_and_wrong_sessions_are_refused(setup: Setup, db_url: str) -> None:
    """An AUTOCOMMIT connection is refused before any statement or refusal,
    even for an empty batch or one with a stale command; so is an object
    that is no Session or Connection."""
    auto = create_engine(db_url, isolation_level="AUTOCOMMIT")
    stale = BatchCommand("old", {}, sent_at=setup.clock.now - dt.timedelta(days=365))
    try:
        for commands in ([], [("a", {})], [stale]):
            with pytest.raises(ConfigurationError, match="AUTOCOMMIT"), auto.connect() as conn:
                with setup.inbox.guard_batch(conn, consumer="c", commands=commands):
                    pytest.fail("the block must not run")
    finally:
        auto.dispose()
    with pytest.raises(ConfigurationError, match="guard_batch_async"):
        with setup.inbox.guard_batch(object(), consumer="c", commands=[]):  # type: ignore[arg-type]
            pytest.fail("the block must not run")
    assert count(setup.engine, setup.inbox.tables.inbox) == 0
    assert setup.inbox.quarantined() == []


def test_bt8_commit_or_rollback_inside_the_block_is_refused(setup: Setup) -> None:
    """A commit or a rollback inside the block is named at its exit, and what
    the block wrote after it never commits."""
    s = setup
    with pytest.raises(ConfigurationError, match=MISTAKE), Session(s.engine) as session:
        with s.inbox.guard_batch(session, consumer="c", commands=[("a", {}), ("b", {})]) as b:
            session.rollback()
            for entry in b.fresh:
                apply(session.connection(), s.accounts, s.ledger, entry.command_id, 1)
        session.commit()  # never reached
    assert count(s.engine, s.ledger) == 0
    with pytest.raises(ConfigurationError, match=MISTAKE), Session(s.engine) as session:
        with s.inbox.guard_batch(session, consumer="c", commands=[("c", {})]) as b:
            session.commit()
            apply(session.connection(), s.accounts, s.ledger, "c", 1)
    assert count(s.engine, s.ledger) == 0
    # A savepoint per entry is allowed.
    with Session(s.engine) as session, session.begin():
        with s.inbox.guard_batch(session, consumer="c", commands=[("d", {})]) as b:
            with session.begin_nested():
                apply(session.connection(), s.accounts, s.ledger, "d", 1)
            b[0].result = "ok"
    assert s.inbox.lookup("c", "d").result == "ok"  # type: ignore[union-attr]


def test_bt9_batches_stay_in_their_tenant_schema(
    tenants: Tenants,  # noqa: F811 - the fixture imported above
    prefix: str,
    clock: FakeClock,
) -> None:
    """Through one Inbox, the same IDs are fresh once per tenant; a mismatch is
    quarantined in the caller's tenant only; nothing lands in the default schema."""
    boxes = _inboxes(tenants, prefix, clock)
    inbox = boxes[None]
    a, b = tenants.names
    seen: dict[str, list[list[str]]] = {a: [], b: []}
    for payload in ({"n": 1}, {"n": 1}):
        for tenant in (a, b):
            with tenants.conn_of(tenants.engine, tenant) as conn, conn.begin():
                cmds = [("inv-1", payload), ("inv-2", payload)]
                with inbox.guard_batch(conn, consumer="billing", commands=cmds) as batch:
                    seen[tenant].append([e.outcome for e in batch])
                    for entry in batch.fresh:
                        entry.result = {"tenant": tenant}
    assert seen[a] == seen[b] == [["fresh", "fresh"], ["duplicate", "duplicate"]]
    with tenants.conn_of(tenants.engine, b) as conn, conn.begin():
        with inbox.guard_batch(conn, consumer="billing", commands=[("inv-1", {"n": 2})]) as bt:
            assert bt[0].refused
    assert [r.command_id for r in boxes[b].quarantined()] == ["inv-1"]
    assert boxes[a].quarantined() == []
    assert boxes[None].quarantined() == []
    assert boxes[b].lookup("billing", "inv-2").result == {"tenant": b}  # type: ignore[union-attr]
    assert inbox.lookup("billing", "inv-1") is None


def test_bt9_a_batch_of_one_stays_in_its_tenant_schema(
    tenants: Tenants,  # noqa: F811 - the fixture imported above
    prefix: str,
    clock: FakeClock,
) -> None:
    """A batch of one (on PostgreSQL, the single claim and result store, which a
    tenant's schema map sends through SQLAlchemy): its claim and its result go
    to the caller's tenant, a repeat is a duplicate there only."""
    boxes = _inboxes(tenants, prefix, clock)
    inbox = boxes[None]
    for tenant in tenants.names:
        outcomes = []
        for _ in range(2):
            with tenants.conn_of(tenants.engine, tenant) as conn, conn.begin():
                cmds = [("solo", {"n": 1})]
                with inbox.guard_batch(conn, consumer="billing", commands=cmds) as batch:
                    outcomes.append(batch[0].outcome)
                    if batch.fresh:
                        batch[0].result = {"tenant": tenant}
                    else:
                        assert batch[0].result == {"tenant": tenant}
        assert outcomes == ["fresh", "duplicate"]
        assert boxes[tenant].lookup("billing", "solo").result == {"tenant": tenant}  # type: ignore[union-attr]
    assert inbox.lookup("billing", "solo") is None


def test_bt9_missing_tables_name_create_schema(engine: Engine, prefix: str, tmp_path: Path) -> None:
    """A database without the inbox tables is refused with the fix named."""
    inbox = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    with pytest.raises(ConfigurationError, match="create_schema"), Session(engine) as session:
        with inbox.guard_batch(session, consumer="c", commands=[("a", {})]):
            pytest.fail("the block must not run")
