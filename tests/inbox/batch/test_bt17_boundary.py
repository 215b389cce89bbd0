"""BT17: a batch block that raises, caught outside by a caller who commits, leaves
no claim and none of its changes; a commit inside it is refused before it runs."""

from __future__ import annotations

import contextlib

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from inboxguard import ConfigurationError
from tests.helpers import apply

from .conftest import Setup


def test_bt17_error_caught_outside_the_batch_block_leaves_nothing(setup: Setup) -> None:
    """Two of three entries applied, then the block raises; the caller catches
    it and commits. No entry is claimed and no change survives; the redelivery
    applies all three once."""
    commands = [(f"c{i}", {"i": i}) for i in range(3)]
    with Session(setup.engine) as session, session.begin():
        with contextlib.suppress(RuntimeError):
            with setup.inbox.guard_batch(session, consumer="b", commands=commands) as batch:
                for entry in list(batch)[:2]:
                    apply(session.connection(), setup.accounts, setup.ledger, entry.command_id, 1)
                raise RuntimeError("handler failed on the third")
    assert [setup.inbox.lookup("b", f"c{i}") for i in range(3)] == [None, None, None]
    assert setup.ledger_ids() == []
    with Session(setup.engine) as session, session.begin():
        with setup.inbox.guard_batch(session, consumer="b", commands=commands) as batch:
            for entry in batch:
                assert entry.fresh
                apply(session.connection(), setup.accounts, setup.ledger, entry.command_id, 1)
    assert setup.ledger_ids() == ["c0", "c1", "c2"]


def test_bt17_commit_inside_the_batch_block_is_refused(setup: Setup) -> None:
    """A ``COMMIT`` statement between two entries is refused before it runs;
    the block carries on, fails at its exit, and nothing commits."""
    commands = [("k0", {}), ("k1", {})]
    with pytest.raises(ConfigurationError, match="committed or rolled back inside"):
        with Session(setup.engine) as session, session.begin():
            with setup.inbox.guard_batch(session, consumer="b", commands=commands) as batch:
                for entry in batch:
                    apply(session.connection(), setup.accounts, setup.ledger, entry.command_id, 1)
                    with pytest.raises(ConfigurationError, match="refused"):
                        session.execute(text("COMMIT"))
    assert setup.inbox.lookup("b", "k0") is None
    assert setup.ledger_ids() == []
