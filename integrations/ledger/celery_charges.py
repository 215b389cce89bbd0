"""A Celery task that charges through the effect ledger, inside the inbox guard.

Run a worker of the reference app with this task added::

    celery -A integrations.ledger.celery_app worker -Q <queue>

Settings are the reference app's (``INBOXGUARD_DB_URL`` etc., see
integrations/celery/settings.py), plus:

``INBOXGUARD_LEDGER_CHAOS``       seed of lost answers and timeouts at the gateway
``INBOXGUARD_LEDGER_KILL_AFTER``  kill the worker child right after the gateway's
                                  N-th charge, before the ledger records it ...
``INBOXGUARD_LEDGER_KILL_ONCE``   ... once: the path of a marker file
``INBOXGUARD_LEDGER_LEASE_S``     the ledger's lease, in seconds (default 5)

``charge_invoice`` runs in the guarded transaction ``inbox_task`` opens: a
duplicate command is skipped before the ledger is touched; a fresh one charges
through ``ledger.execute`` with a key that belongs to the invoice, and records
the charge on the invoice in the same transaction. Retryable ledger errors
become Celery retries (``InboxTask``); a killed child's message is requeued
(``reject_on_worker_lost``).
"""

from __future__ import annotations

import datetime as dt
import os
import random
from pathlib import Path
from typing import Any

import inboxguard
from inboxguard.adapters.celery import inbox_task
from integrations.celery import tasks as reference
from integrations.ledger.billing import CELERY_TASK, parts

ledger, gateway, invoices = parts(reference.engine, reference.SETTINGS.table_prefix)
LEASE = dt.timedelta(seconds=float(os.environ.get("INBOXGUARD_LEDGER_LEASE_S", "5")))
if os.environ.get("INBOXGUARD_LEDGER_CHAOS"):
    _rng = random.Random(int(os.environ["INBOXGUARD_LEDGER_CHAOS"]))
    gateway.script = [_rng.choice(["ok", "accept_then_timeout", "timeout"]) for _ in range(500)]
if os.environ.get("INBOXGUARD_LEDGER_KILL_AFTER"):
    _limit = int(os.environ["INBOXGUARD_LEDGER_KILL_AFTER"])
    _marker = Path(os.environ.get("INBOXGUARD_LEDGER_KILL_ONCE", "/nonexistent/never"))

    def _die_after(key: str) -> None:
        if gateway.charges() >= _limit and not _marker.exists():
            _marker.touch()
            os._exit(137)  # after the gateway charged, before the ledger recorded it

    gateway.after_apply = _die_after


@inbox_task(
    reference.inbox,
    session_factory=reference.Session,
    command_id="command_id",
    consumer="billing.charge-invoice",
    name=CELERY_TASK,
    max_retries=30,
    retry_backoff_max=2,
    # `inboxguard guarantees --app integrations.ledger.celery_app:app` is checked
    # against integrations/ledger/guarantees.lock by the test suite.
    guarantee=inboxguard.Guarantee(
        provider=gateway,
        ledger=ledger,
        compensation="refund through the gateway (EffectLedger.compensate)",
        terminal_states=("charged", "declined", "refunded", "quarantined"),
    ),
)
def charge_invoice(command_id: str, invoice_id: int, amount: int) -> dict[str, Any]:
    """Charge an invoice once, however often its command is delivered."""
    session = inboxguard.current_session()
    receipt = ledger.execute(
        f"invoice-{invoice_id}/charge",
        gateway,
        {"amount": amount, "currency": "EUR"},
        lease=LEASE,
    )
    session.execute(
        invoices.update()
        .where(invoices.c.id == invoice_id)
        .values(charge=receipt.reference, paid_times=invoices.c.paid_times + 1)
    )
    return {"invoice_id": invoice_id, "charge": receipt.reference}
