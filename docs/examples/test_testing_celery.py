"""Prove a Celery task effectively once with inboxguard's kit.

Run with:  pytest docs/examples/test_testing_celery.py

The kit calls the task in-process (``task(**message)``) through the
adapter's guard, as a worker runs it; no broker is needed. The task calls the
provider inside its transaction, so on SQLite its ledger keeps its tables in a
database of its own (SQLite has one writer at a time).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.celery import inbox_task
from inboxguard.testing import (
    FakeProvider,
    FaultKit,
    FaultPoint,
    ManualClock,
    assert_effectively_once,
)

#: Opt in to the kit's fixtures (or pass -p inboxguard.testing, or list it in a root conftest.py).
pytest_plugins = ["inboxguard.testing"]

MESSAGE = {"order_id": "order-9", "amount": 2500}


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
def ship(kit: FaultKit) -> Any:
    """The task under test, bound to the test's inbox, ledger and provider."""
    ledger, provider = kit.ledger, kit.provider
    assert ledger is not None
    assert provider is not None

    @inbox_task(
        kit.inbox,
        session_factory=sessionmaker(kit.inbox.engine),
        command_id="order_id",
        consumer="shipping.buy-label",
        name=f"shipping.buy_label.{uuid.uuid4().hex}",  # one task per test
    )
    def buy_label(order_id: str, amount: int) -> dict[str, str]:
        receipt = ledger.execute(f"{order_id}/label", provider, {"amount": amount})
        return {"label": receipt.reference}

    return buy_label


def test_a_redelivered_task_buys_one_label(kit: FaultKit, ship: Any) -> None:
    """A redelivered task is skipped: one label bought."""
    record = kit.deliver_twice(ship, MESSAGE)
    assert (record.deliveries, record.handler_runs, record.provider_requests) == (2, 1, 1)
    assert_effectively_once(record)


def test_two_workers_buy_one_label(kit: FaultKit, ship: Any) -> None:
    """Two workers at once: one label."""
    assert_effectively_once(kit.deliver_concurrently(ship, MESSAGE, workers=2))


@pytest.mark.parametrize(
    "point",
    [FaultPoint.PROVIDER_ACCEPTED, FaultPoint.BEFORE_COMMIT, FaultPoint.BEFORE_ACK],
)
def test_a_worker_killed_anywhere_buys_one_label(
    kit: FaultKit, ship: Any, point: FaultPoint
) -> None:
    """A worker killed at each seam: still one label."""
    record = kit.crash(ship, MESSAGE, at=point)
    assert record.outcomes == [f"crashed at {point}", "acked"]
    assert_effectively_once(record)
