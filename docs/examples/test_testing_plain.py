"""Prove a plain handler effectively once with inboxguard's kit.

Run with:  pytest docs/examples/test_testing_plain.py
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, func, select
from sqlalchemy.orm import Session

import inboxguard
from inboxguard.testing import FakeProvider, FaultKit, FaultPoint, assert_effectively_once

metadata = MetaData()
charges = Table(
    "charges",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("invoice", Integer, nullable=False),
    Column("reference", String(64), nullable=False),
)
#: Opt in to the kit's fixtures (or pass -p inboxguard.testing, or list it in a root conftest.py).
pytest_plugins = ["inboxguard.testing"]

MESSAGE = {"invoice": 7, "amount": 1500}


def make_handler(
    inbox: inboxguard.Inbox, ledger: inboxguard.EffectLedger, provider: inboxguard.Provider
) -> Any:
    """The handler under test: charge at the provider through the ledger, then
    record the charge in the same transaction as the inbox row."""
    metadata.create_all(inbox.engine)

    def charge_invoice(message: dict[str, Any]) -> dict[str, Any]:
        key = f"invoice-{message['invoice']}/charge"
        # On SQLite the ledger runs before the guarded transaction (one writer).
        receipt = ledger.execute(key, provider, {"amount": message["amount"]})
        with Session(inbox.engine) as session, session.begin():
            with inbox.guard(
                session, consumer="billing.charge", command_id=key, payload=message
            ) as entry:
                if entry.duplicate:
                    return dict(entry.result)
                session.execute(
                    charges.insert().values(invoice=message["invoice"], reference=receipt.reference)
                )
                entry.result = {"reference": receipt.reference}
        return entry.result

    return charge_invoice


def charge_rows(inbox: inboxguard.Inbox) -> int:
    """Rows in the app's own table: a double charge shows as two."""
    with inbox.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(charges)).scalar_one()


@pytest.fixture
def handler(
    inboxguard_inbox: inboxguard.Inbox,
    inboxguard_ledger: inboxguard.EffectLedger,
    inboxguard_provider: FakeProvider,
) -> Any:
    """The handler, wired to the kit's inbox, ledger and provider."""
    return make_handler(inboxguard_inbox, inboxguard_ledger, inboxguard_provider)


def test_a_duplicate_is_applied_once(inboxguard_kit: FaultKit, handler: Any) -> None:
    """A redelivery is skipped: one run, one provider request."""
    record = inboxguard_kit.deliver_twice(handler, MESSAGE)
    assert (record.deliveries, record.handler_runs, record.provider_requests) == (2, 1, 1)
    assert_effectively_once(record)
    assert charge_rows(inboxguard_kit.inbox) == 1


def test_racing_workers_charge_once(inboxguard_kit: FaultKit, handler: Any) -> None:
    """Four workers at once: one charge."""
    record = inboxguard_kit.deliver_concurrently(handler, MESSAGE, workers=4)
    assert_effectively_once(record)
    assert charge_rows(inboxguard_kit.inbox) == 1


@pytest.mark.parametrize(
    "point",
    [FaultPoint.PROVIDER_ACCEPTED, FaultPoint.BEFORE_COMMIT, FaultPoint.BEFORE_ACK],
)
def test_a_crash_anywhere_charges_once(
    inboxguard_kit: FaultKit, handler: Any, point: FaultPoint
) -> None:
    """A worker killed at each seam: the redelivery charges nothing more."""
    record = inboxguard_kit.crash(handler, MESSAGE, at=point)
    assert record.outcomes[0] == f"crashed at {point}"
    assert_effectively_once(record)
    assert charge_rows(inboxguard_kit.inbox) == 1


def test_an_expired_lease_is_fenced(inboxguard_kit: FaultKit, handler: Any) -> None:
    """A stalled worker loses its lease; its late answer is refused."""
    record = inboxguard_kit.expire_lease(handler, MESSAGE)
    assert "retry: StaleLeaseError" in record.outcomes
    assert_effectively_once(record)


def test_after_the_window_without_lookup_nothing_is_resent(
    inboxguard_kit: FaultKit, handler: Any, inboxguard_provider: FakeProvider
) -> None:
    """Past the provider's window, without a lookup: left for an operator, never re-sent."""
    inboxguard_provider.supports_lookup = False
    record = inboxguard_kit.retry_after_window(handler, MESSAGE)
    assert record.outcomes[-1] == "dead-lettered: ReconciliationRequiredError"
    assert (record.provider_effects, record.ledger_state) == (1, "unknown")
