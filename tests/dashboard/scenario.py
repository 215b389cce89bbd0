"""Fill a database the way production would: real guarded consumers (kombu on
its in-memory transport), the effect ledger against the sandbox gateway, the
outbox and its dispatcher. Nothing is written to the tables by hand.

* ``order-1``, confirmed while retrying: the dispatcher's publish reached the
  queue but its confirmation was lost (the outbox row is retrying); the
  consumer charged the payment (confirmed) and then failed, so the inbox
  rolled back and the message waits for its next attempt.
* ``order-2``, complete but unknown: delivered, accepted by the inbox; the
  notification call timed out after the provider took it (``unknown``) and
  the handler completed without it, leaving it to reconciliation.
* ``order-3`` and ``order-4``: a second delivery with another payload (one
  carrying ``<script>``) is refused and quarantined as a payload mismatch.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from dataclasses import dataclass
from typing import Any

from kombu import Connection, Consumer, Producer, Queue
from kombu.message import Message
from sqlalchemy import create_engine
from sqlalchemy.orm import Session, sessionmaker

import inboxguard
from inboxguard.adapters.kombu import guarded
from inboxguard.adapters.kombu.transport import KombuTransport
from integrations.ledger.gateway import SandboxGateway
from tests.conftest import unique

SCRIPT = "<script>document.title='owned'</script>"
CONSUMER = "orders"


@dataclass(frozen=True)
class Filled:
    """What the scenario left behind: quarantine record ids by command."""

    quarantine: dict[str, int]


class _LostConfirm:
    """A transport whose publish reaches the queue, then fails (the broker's
    confirmation is lost): the outbox row is retried though it was delivered."""

    def __init__(self, inner: KombuTransport, lost: set[str]) -> None:
        self.inner, self.lost = inner, lost

    def __call__(self, message: inboxguard.OutboxMessage) -> Any:
        receipt = self.inner(message)
        if message.command_id in self.lost:
            raise TimeoutError("publish confirmation lost")
        return receipt


def fill(url: str, prefix: str = "inboxguard_") -> Filled:
    engine = create_engine(url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=7), table_prefix=prefix)
    inbox.create_schema()
    outbox = inboxguard.Outbox(engine, table_prefix=prefix)
    outbox.create_schema()
    ledger = inboxguard.EffectLedger(engine, table_prefix=prefix, actor="worker-1")
    ledger.create_schema()
    gateway = SandboxGateway(engine, table_prefix=prefix)
    gateway.create_schema()
    queue_name = unique("orders")
    queue = Queue(queue_name)
    orders = {
        "order-1": {"order": 1, "amount": 40},
        "order-2": {"order": 2, "amount": 15},
        "order-3": {"order": 3, "amount": 7},
        "order-4": {"order": 4, "amount": 9},
    }
    with Session(engine) as session, session.begin():
        for cid, payload in orders.items():
            outbox.add(session, command_id=cid, destination=queue_name, payload=payload)

    def handle(body: dict[str, Any], message: Message) -> dict[str, Any]:
        cid = message.headers["x-inbox-command-id"]
        if cid == "order-1":
            ledger.execute(f"{cid}/charge", gateway, {"amount": body["amount"]})
            raise ConnectionError("the stock service is down")  # after the charge
        if cid == "order-2":
            gateway.script.append("accept_then_timeout")
            # A notification is best effort: reconciliation settles it later.
            with contextlib.suppress(inboxguard.EffectOutcomeUnknownError):
                ledger.execute(f"{cid}/notify", gateway, {"to": "customer-2"})
        return {"done": cid}

    with Connection("memory://") as conn:
        transport = _LostConfirm(KombuTransport(conn, declare=[queue]), {"order-1"})
        dispatcher = inboxguard.Dispatcher(outbox, transport, max_attempts=5)
        assert dispatcher.run_once() == 3
        callback = guarded(
            handle,
            inbox,
            session_factory=sessionmaker(engine),
            consumer=CONSUMER,
            retry_delay=dt.timedelta(0),
        )
        with Consumer(conn, queues=[queue], callbacks=[callback], accept=["json"]):
            for _ in range(4):
                conn.drain_events(timeout=5)
        # The same commands delivered again with other payloads: refused.
        producer = Producer(conn)
        for cid, note in (("order-3", SCRIPT), ("order-4", "changed by hand")):
            body = {**orders[cid], "amount": 999, "note": note}
            sent = dt.datetime.now(dt.UTC).isoformat()
            headers = {"x-inbox-command-id": cid, "x-inbox-sent-at": sent}
            producer.publish(body, routing_key=queue_name, declare=[queue], headers=headers)
        with Consumer(conn, queues=[queue], callbacks=[callback], accept=["json"]):
            for _ in range(3):  # order-1's second attempt fails again, then the two refusals
                conn.drain_events(timeout=5)
    records = {r.command_id: r.id for r in inbox.quarantined(CONSUMER)}
    engine.dispose()
    return Filled(records)
