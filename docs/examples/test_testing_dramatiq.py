"""Prove a Dramatiq actor effectively once with inboxguard's kit.

Run with:  pytest docs/examples/test_testing_dramatiq.py

The actor is declared on a ``StubBroker`` with ``InboxMiddleware``; the kit
calls it in-process (``actor(**message)``) through the middleware's guard.
Its ledger keeps its tables in a database of its own on SQLite, since the
provider call runs inside the actor's transaction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.dramatiq import InboxMiddleware
from inboxguard.testing import (
    FakeProvider,
    FaultKit,
    FaultPoint,
    ManualClock,
    assert_effectively_once,
)

#: Opt in to the kit's fixtures (or pass -p inboxguard.testing, or list it in a root conftest.py).
pytest_plugins = ["inboxguard.testing"]

MESSAGE = {"user_id": 31, "plan": "pro"}


@pytest.fixture
def kit(
    tmp_path: Path,
    inboxguard_inbox: inboxguard.Inbox,
    inboxguard_provider: FakeProvider,
    inboxguard_clock: ManualClock,
) -> FaultKit:
    """The kit, with a ledger in a database of its own."""
    ledger = inboxguard.EffectLedger(
        create_engine(f"sqlite:///{tmp_path / 'ledger.db'}"), clock=inboxguard_clock
    )
    ledger.create_schema()
    return FaultKit(
        inboxguard_inbox, ledger=ledger, provider=inboxguard_provider, clock=inboxguard_clock
    )


@pytest.fixture
def upgrade(kit: FaultKit) -> Any:
    """The actor under test, declared on a stub broker with the inbox middleware."""
    ledger, provider = kit.ledger, kit.provider
    assert ledger is not None
    assert provider is not None
    broker = StubBroker()
    broker.add_middleware(
        InboxMiddleware(kit.inbox, session_factory=sessionmaker(kit.inbox.engine))
    )

    @dramatiq.actor(broker=broker, inbox_command_id=lambda user_id, plan: f"upgrade-{user_id}")
    def upgrade_plan(user_id: int, plan: str) -> dict[str, str]:
        receipt = ledger.execute(f"user-{user_id}/upgrade", provider, {"plan": plan})
        return {"invoice": receipt.reference}

    yield upgrade_plan
    broker.close()


def test_a_redelivered_message_upgrades_once(kit: FaultKit, upgrade: Any) -> None:
    """A redelivered message is skipped: one upgrade."""
    record = kit.deliver_twice(upgrade, MESSAGE)
    assert (record.handler_runs, record.provider_requests) == (1, 1)
    assert_effectively_once(record)


@pytest.mark.parametrize("point", [FaultPoint.BEFORE_COMMIT, FaultPoint.BEFORE_ACK])
def test_a_worker_killed_around_the_commit_upgrades_once(
    kit: FaultKit, upgrade: Any, point: FaultPoint
) -> None:
    """A worker killed before or after the commit: one upgrade."""
    record = kit.crash(upgrade, MESSAGE, at=point)
    assert record.outcomes == [f"crashed at {point}", "acked"]
    assert_effectively_once(record)
