"""The module a Dramatiq worker loads: ``dramatiq integrations.dramatiq.worker``.

The broker comes first, then ``InboxMiddleware``, then the actors: actor
options are checked against the middleware present when they are declared.
With ``INBOXGUARD_DRAMATIQ_GUARD=0`` the same actor runs in a plain
transaction, without the inbox (the benchmark's baseline).
"""

from __future__ import annotations

import os
import time
from typing import Any

import dramatiq
from dramatiq.results import Results
from dramatiq.results.backends import RedisBackend
from sqlalchemy import create_engine, insert
from sqlalchemy.orm import Session, sessionmaker

import inboxguard
from inboxguard.adapters.dramatiq import InboxMiddleware
from integrations.dramatiq.brokers import make_broker
from integrations.dramatiq.model import make_inbox, shipments_table
from integrations.dramatiq.settings import Settings

settings = Settings.from_env()
engine = create_engine(settings.db_url, pool_size=16, pool_pre_ping=True)
Sessions = sessionmaker(engine)
shipments = shipments_table(settings.prefix)

broker = make_broker(settings.broker_url, redis_heartbeat_ms=settings.redis_heartbeat_ms)
# Results keep what ``ship`` returned; for a duplicate that is the stored result.
broker.add_middleware(Results(backend=RedisBackend(url=settings.results_url)))
if settings.guard:
    inbox = make_inbox(engine, settings.prefix, settings.retention_days)
    broker.add_middleware(InboxMiddleware(inbox, session_factory=Sessions))


class DelayAcks(dramatiq.Middleware):
    """Fault injection: pause after the actor returned (its transaction
    committed) and before the message is acknowledged, so that a crash is
    likely to land in that gap and the broker redelivers committed work."""

    def after_process_message(self, broker: Any, message: Any, **_: Any) -> None:
        time.sleep(settings.ack_delay_ms / 1000)


if settings.ack_delay_ms:
    broker.add_middleware(DelayAcks())
dramatiq.set_broker(broker)

#: Options of the reference actor. The consumer name is explicit so that
#: renaming the function keeps the evidence of past commands.
GUARD_OPTIONS: dict[str, Any] = (
    {"inbox_command_id": "order_id", "inbox_consumer": "shipping.ship"} if settings.guard else {}
)


def apply_shipment(session: Session, order_id: str, sku: str, qty: int) -> dict[str, Any]:
    """The business mutation: record the shipment."""
    session.execute(
        insert(shipments).values(order_id=order_id, sku=sku, qty=qty, worker_pid=os.getpid())
    )
    if settings.work_ms:
        time.sleep(settings.work_ms / 1000)  # stands in for real work inside the transaction
    return {"order_id": order_id, "shipped": qty}


@dramatiq.actor(
    queue_name=settings.queue, max_retries=10, min_backoff=200, store_results=True, **GUARD_OPTIONS
)
def ship(order_id: str, sku: str, qty: int) -> dict[str, Any]:
    """Ship an order once, however often its command is delivered."""
    if settings.guard:
        return apply_shipment(inboxguard.current_session(), order_id, sku, qty)
    with Sessions.begin() as session:
        return apply_shipment(session, order_id, sku, qty)
