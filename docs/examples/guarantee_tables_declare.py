"""Declare what only you know, let inboxguard derive the rest, lock the
reviewed table, and see the lock catch a changed retention policy.

Runs standalone on a throwaway SQLite file (the effect ledger needs a pool
of real connections): ``python docs/examples/guarantee_tables_declare.py``.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import inboxguard

folder = tempfile.mkdtemp()
engine = create_engine(f"sqlite:///{Path(folder) / 'app.db'}")
inbox = inboxguard.Inbox(
    engine, retention=inboxguard.RetentionPolicy(dead_letter_replay=dt.timedelta(days=30))
)
inbox.create_schema()
ledger = inboxguard.EffectLedger(engine, table_prefix="fx_")


@inbox.handler(
    consumer="billing.charge-invoice",
    command_id="invoice_id",
    guarantee=inboxguard.Guarantee(
        # what only you know: the transport acks, the provider, how to undo
        delivery_mode="at least once: the poller commits its offset after the handler",
        provider=inboxguard.known_contract("stripe"),
        ledger=ledger,
        compensation="refund the charge (EffectLedger.compensate)",
        terminal_states=("charged", "declined", "refunded"),
    ),
)
def charge_invoice(session: Session, invoice_id: str) -> None:
    """Charge through ledger.execute(...) and record it on the invoice."""


tables = inboxguard.guarantees_of(inbox)
print(inboxguard.guarantees_markdown(tables))
for problem in inboxguard.contradictions_of(inbox):
    print("contradiction:", problem)

reviewed = inboxguard.lock_text(tables)  # commit this as guarantees.lock
inbox.retention = inboxguard.RetentionPolicy(dead_letter_replay=dt.timedelta(days=7))
changes = inboxguard.lock_changes(inboxguard.guarantees_of(inbox), inboxguard.read_lock(reviewed))
for change in changes:
    print("changed since the review:", change)
assert any(change.setting == "horizon" for change in changes)
