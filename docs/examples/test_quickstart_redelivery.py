"""Test your own handler the way the broker will treat it: deliver every message twice.

Run it with `pytest`. Each test gets a SQLite file of its own from `tmp_path`.
"""

from datetime import timedelta

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, func, select
from sqlalchemy.orm import Session

import inboxguard

charges = Table("charges", MetaData(), Column("invoice", String(40)), Column("cents", Integer))


def charge_invoice(engine, inbox: inboxguard.Inbox, body: dict) -> dict:
    """The handler under test (yours lives in your application)."""
    with Session(engine) as session, session.begin():
        with inbox.guard(
            session, consumer="billing.charge-invoice", command_id=body["command_id"], payload=body
        ) as entry:
            if entry.duplicate:
                return entry.result
            session.execute(charges.insert().values(invoice=body["invoice"], cents=body["cents"]))
            entry.result = {"charged": body["cents"]}
            return entry.result


@pytest.fixture
def app(tmp_path):
    engine = create_engine(f"sqlite:///{tmp_path / 'app.db'}")  # a file: see the quick start
    charges.metadata.create_all(engine)
    inbox = inboxguard.Inbox(engine, retention=timedelta(days=7))
    inbox.create_schema()
    yield engine, inbox
    engine.dispose()


def _charged(engine) -> int:
    with engine.connect() as conn:
        return conn.scalar(select(func.count()).select_from(charges))


def test_a_redelivered_message_is_applied_once(app):
    engine, inbox = app
    body = {"command_id": "invoice-42/2026-11", "invoice": "42", "cents": 1500}
    first = charge_invoice(engine, inbox, body)
    assert charge_invoice(engine, inbox, body) == first  # the stored result
    assert _charged(engine) == 1


def test_a_changed_payload_is_refused_and_quarantined(app):
    engine, inbox = app
    body = {"command_id": "invoice-42/2026-11", "invoice": "42", "cents": 1500}
    charge_invoice(engine, inbox, body)
    with pytest.raises(inboxguard.PayloadMismatchError):
        charge_invoice(engine, inbox, {**body, "cents": 9900})
    assert _charged(engine) == 1
    [record] = inbox.quarantined()
    assert record.reason == "payload_mismatch"


def test_a_failed_handler_leaves_no_evidence(app):
    engine, inbox = app
    with pytest.raises(ZeroDivisionError):
        with Session(engine) as session, session.begin():
            with inbox.guard(
                session, consumer="billing.charge-invoice", command_id="c", payload={}
            ):
                raise ZeroDivisionError  # the handler failed: everything rolls back
    assert inbox.lookup("billing.charge-invoice", "c") is None  # the retry will run it
