"""Prove a handler that only writes to its database effectively once.

Run with:  pytest docs/examples/test_testing_database_only.py

The most common handler calls no provider: it changes rows in the same
transaction as the inbox's. ``assert_effectively_once`` then checks the
inbox row alone (the ledger and the provider saw no effect).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, func, insert, select
from sqlalchemy.orm import Session, sessionmaker

import inboxguard
from inboxguard.adapters.celery import inbox_task
from inboxguard.testing import FaultKit, assert_effectively_once

#: Opt in to the kit's fixtures (or pass -p inboxguard.testing, or list it in a root conftest.py).
pytest_plugins = ["inboxguard.testing"]

metadata = MetaData()
reservations = Table(
    "reservations",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("order_id", String(64), nullable=False),
)
MESSAGE = {"order_id": "order-5", "sku": "tea"}


@pytest.fixture
def reserve(inboxguard_inbox: inboxguard.Inbox) -> Any:
    """The handler under test: one row in the app's table, under the guard."""
    metadata.create_all(inboxguard_inbox.engine)

    def reserve_stock(message: dict[str, Any]) -> dict[str, str]:
        with Session(inboxguard_inbox.engine) as session, session.begin():
            with inboxguard_inbox.guard(
                session, consumer="stock.reserve", command_id=message["order_id"], payload=message
            ) as entry:
                if entry.duplicate:
                    return dict(entry.result)
                session.execute(insert(reservations).values(order_id=message["order_id"]))
                entry.result = {"reserved": message["order_id"]}
        return entry.result

    return reserve_stock


def reserved(inbox: inboxguard.Inbox) -> int:
    """Rows in the app's own table: a double reservation shows as two."""
    with inbox.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(reservations)).scalar_one()


def test_a_redelivery_reserves_once(inboxguard_kit: FaultKit, reserve: Any) -> None:
    """Delivered twice: one run, one row."""
    record = inboxguard_kit.deliver_twice(reserve, MESSAGE)
    assert (record.deliveries, record.handler_runs) == (2, 1)
    assert_effectively_once(record)
    assert reserved(inboxguard_kit.inbox) == 1


def test_four_workers_reserve_once(inboxguard_kit: FaultKit, reserve: Any) -> None:
    """Four workers at once: one row."""
    assert_effectively_once(inboxguard_kit.deliver_concurrently(reserve, MESSAGE, workers=4))
    assert reserved(inboxguard_kit.inbox) == 1


def test_a_celery_task_replayed_after_retention_is_refused(
    inboxguard_kit: FaultKit, inboxguard_inbox: inboxguard.Inbox
) -> None:
    """The kit stamps the task's x-inbox-sent-at header: the late replay is
    quarantined as beyond_retention, not run as a new command."""
    metadata.create_all(inboxguard_inbox.engine)

    @inbox_task(
        inboxguard_inbox,
        session_factory=sessionmaker(inboxguard_inbox.engine),
        command_id="order_id",
        consumer="stock.reserve",
        name=f"stock.reserve.{uuid.uuid4().hex}",  # one task per test
    )
    def reserve_stock(order_id: str, sku: str) -> dict[str, str]:
        inboxguard.current_session().execute(insert(reservations).values(order_id=order_id))
        return {"reserved": order_id}

    record = inboxguard_kit.replay_after_retention(reserve_stock, MESSAGE)
    assert record.outcomes == ["acked", "dead-lettered: BeyondRetentionError"]
    assert reserved(inboxguard_inbox) == 1
