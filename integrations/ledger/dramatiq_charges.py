"""A Dramatiq actor that charges through the effect ledger, inside the inbox guard.

Load it next to the reference app's worker module (it imports that module, so
the broker and ``InboxMiddleware`` are set up first)::

    dramatiq integrations.ledger.dramatiq_charges --queues <queue>

It reads the reference app's settings (``INBOXGUARD_DRAMATIQ_*``, see
integrations/dramatiq/settings.py) and three of its own:

``INBOXGUARD_LEDGER_CHAOS``        seed of lost answers and timeouts at the gateway
``INBOXGUARD_LEDGER_KILL_AFTER``   kill the worker process right after the gateway's
                                   N-th charge, before the ledger records it
``INBOXGUARD_LEDGER_LEASE_S``      the ledger's lease, in seconds (default 5)

The actor ``charge_invoice`` runs in the inbox guard's transaction (the
middleware opens it): a duplicate command is skipped before the ledger is
touched; a fresh one charges through ``ledger.execute`` with a key that
belongs to the invoice and records the charge on the invoice in the same
transaction. Retryable ledger errors (an unknown outcome, a lease held or lost)
become ``dramatiq.Retry``; an effect that needs an operator or was refused is
not retried.
"""

from __future__ import annotations

import datetime as dt
import os
import random
from typing import Any

import dramatiq

import inboxguard
from inboxguard import ProviderRejectedError, ReconciliationRequiredError
from integrations.dramatiq import worker as reference
from integrations.ledger.billing import ACTOR, parts

settings = reference.settings


ledger, gateway, invoices = parts(reference.engine, settings.prefix)
LEASE = dt.timedelta(seconds=float(os.environ.get("INBOXGUARD_LEDGER_LEASE_S", "5")))
if os.environ.get("INBOXGUARD_LEDGER_CHAOS"):
    _rng = random.Random(int(os.environ["INBOXGUARD_LEDGER_CHAOS"]))
    gateway.script = [_rng.choice(["ok", "accept_then_timeout", "timeout"]) for _ in range(500)]
if os.environ.get("INBOXGUARD_LEDGER_KILL_AFTER"):
    _limit = int(os.environ["INBOXGUARD_LEDGER_KILL_AFTER"])

    def _die_after(key: str) -> None:
        if gateway.charges() >= _limit:
            os._exit(137)  # after the gateway charged, before the ledger recorded it

    gateway.after_apply = _die_after


@dramatiq.actor(
    actor_name=ACTOR,
    queue_name=settings.queue,
    max_retries=30,
    min_backoff=100,
    max_backoff=2000,
    store_results=True,
    throws=(ReconciliationRequiredError, ProviderRejectedError),
    inbox_command_id="command_id",
    inbox_consumer="billing.charge-invoice",
    # `inboxguard guarantees --app integrations.ledger.dramatiq_charges:reference.broker`
    # is checked against integrations/ledger/guarantees-dramatiq.lock by the test suite.
    inbox_guarantee=inboxguard.Guarantee(
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
