"""The module a Dramatiq worker loads: ``dramatiq integrations.dramatiq.worker``.

The broker comes first, then ``InboxMiddleware``, then the actors: actor
options are checked against the middleware present when they are declared.
With ``INBOXGUARD_DRAMATIQ_GUARD=0`` the same actor runs in a plain
transaction, without the inbox (the benchmark's baseline). The hang settings
stop the ``ship`` actor at a known point for the kill tests.

Benchmark only: ``INBOXGUARD_DRAMATIQ_EVIDENCE=1`` (with ``GUARD=0``) makes the
plain ``ship`` also write the inbox row in its transaction, a plain ``INSERT
... ON CONFLICT DO NOTHING`` of its six columns (``benchmarks.bench_inbox``),
and skip the body when that inserted nothing: the evidence-row floor of
``python -m benchmarks dramatiq``. It is no guard (no digest check, no stored
result, no quarantine) and imports the ``benchmarks`` package of a checkout.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any, cast

import dramatiq
from dramatiq.middleware import AsyncIO
from dramatiq.results import Results
from dramatiq.results.backends import RedisBackend
from sqlalchemy import create_engine, insert
from sqlalchemy.engine import CursorResult
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session, sessionmaker

import inboxguard
from inboxguard.adapters.dramatiq import InboxMiddleware
from integrations.dramatiq.brokers import make_broker
from integrations.dramatiq.model import async_db_url, make_inbox, shipments_table
from integrations.dramatiq.settings import Settings
from integrations.payments import hang, hang_after_commit

settings = Settings.from_env()
engine = create_engine(settings.db_url, pool_size=16, pool_pre_ping=True)
Sessions = sessionmaker(engine)
# The async actor's engine; it lives on Dramatiq's event loop thread.
async_engine = create_async_engine(async_db_url(settings.db_url), pool_size=16)
AsyncSessions = async_sessionmaker(async_engine)
shipments = shipments_table(settings.prefix)

broker = make_broker(settings.broker_url, redis_heartbeat_ms=settings.redis_heartbeat_ms)
# Results keep what ``ship`` returned; for a duplicate that is the stored result.
broker.add_middleware(Results(backend=RedisBackend(url=settings.results_url)))
# The event loop thread async actors run on.
broker.add_middleware(AsyncIO())
if settings.guard:
    inbox = make_inbox(engine, settings.prefix, settings.retention_days)
    broker.add_middleware(
        InboxMiddleware(inbox, session_factory=Sessions, async_session_factory=AsyncSessions)
    )
if settings.evidence:
    if settings.guard:
        raise SystemExit("INBOXGUARD_DRAMATIQ_EVIDENCE=1 is the plain worker's: set GUARD=0")
    # Benchmark only (see the module's docstring).
    from benchmarks.bench_inbox import evidence_row, evidence_statement

    evidence_insert = evidence_statement(
        make_inbox(engine, settings.prefix, settings.retention_days)
    )


def evidence_written(session: Session, order_id: str) -> bool:
    """Benchmark only: insert the command's inbox row plainly; False if it was there."""
    written = cast("CursorResult[Any]", session.execute(evidence_insert, evidence_row(order_id)))
    return written.rowcount == 1


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
#: What only we know of the actors' guarantee tables; the rest is derived
#: (`inboxguard guarantees --app integrations.dramatiq.worker:broker`,
#: checked against integrations/dramatiq/guarantees.lock by the test suite).
GUARANTEE = inboxguard.Guarantee(
    no_external_effect=True, terminal_states=("shipped (one shipment row)", "quarantined")
)
GUARD_OPTIONS: dict[str, Any] = (
    {
        "inbox_command_id": "order_id",
        "inbox_consumer": "shipping.ship",
        "inbox_guarantee": GUARANTEE,
    }
    if settings.guard
    else {}
)


def apply_shipment(session: Session, order_id: str, sku: str, qty: int) -> dict[str, Any]:
    """The business mutation: record the shipment."""
    session.execute(
        insert(shipments).values(order_id=order_id, sku=sku, qty=qty, worker_pid=os.getpid())
    )
    if settings.work_ms:
        time.sleep(settings.work_ms / 1000)  # stands in for real work inside the transaction
    if order_id == settings.hang_in_body:
        hang(order_id)
    if order_id == settings.hang_after_commit:
        hang_after_commit(session, order_id)
    return {"order_id": order_id, "shipped": qty}


@dramatiq.actor(
    queue_name=settings.queue, max_retries=10, min_backoff=200, store_results=True, **GUARD_OPTIONS
)
def ship(order_id: str, sku: str, qty: int) -> dict[str, Any] | None:
    """Ship an order once, however often its command is delivered."""
    if settings.guard:
        return apply_shipment(inboxguard.current_session(), order_id, sku, qty)
    with Sessions.begin() as session:
        if settings.evidence and not evidence_written(session, order_id):
            return None
        return apply_shipment(session, order_id, sku, qty)


ASYNC_GUARD_OPTIONS: dict[str, Any] = (
    {
        "inbox_command_id": "order_id",
        "inbox_consumer": "shipping.ship_async",
        "inbox_guarantee": GUARANTEE,
    }
    if settings.guard
    else {}
)


async def apply_shipment_async(
    session: AsyncSession, order_id: str, sku: str, qty: int
) -> dict[str, Any]:
    """The business mutation of ``ship_async``: the same row as ``ship``."""
    await session.execute(
        insert(shipments).values(order_id=order_id, sku=sku, qty=qty, worker_pid=os.getpid())
    )
    if settings.work_ms:
        await asyncio.sleep(settings.work_ms / 1000)
    return {"order_id": order_id, "shipped": qty}


@dramatiq.actor(
    queue_name=settings.queue,
    max_retries=10,
    min_backoff=200,
    store_results=True,
    **ASYNC_GUARD_OPTIONS,
)
async def ship_async(order_id: str, sku: str, qty: int) -> dict[str, Any]:
    """``ship`` as an ``async def`` actor: run on Dramatiq's event loop thread,
    in an AsyncSession transaction, once per command."""
    if settings.guard:
        return await apply_shipment_async(inboxguard.current_session(), order_id, sku, qty)
    async with AsyncSessions.begin() as session:
        return await apply_shipment_async(session, order_id, sku, qty)
