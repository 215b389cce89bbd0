"""The FastStream worker: applies each payment command once, whatever the broker
redelivers, on RabbitMQ, Redis Streams or NATS JetStream.

The inbox is built on a sync Engine of its own on the same database (for
schema creation and the start-up checks); the guard writes through the
AsyncEngine's sessions. ``INBOXGUARD_HANG_IN_BODY`` and
``INBOXGUARD_HANG_BEFORE_ACK`` (see ``integrations/payments.py``) stop it at a
known point for the kill tests; ``INBOXGUARD_DELIVERY_LOG`` records each
delivery (``ID`` when it starts, ``+ID`` once settled) and then also logs, on
JetStream, where each delivery sits in the stream and how many times the
broker has delivered it (``delivery ID stream_seq=... num_delivered=...``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from faststream import BaseMiddleware, FastStream
from sqlalchemy import create_engine, insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

import inboxguard
from inboxguard.adapters.faststream import InboxMiddleware
from integrations.faststream.brokers import make_broker, subscribe
from integrations.payments import (
    RETENTION,
    Config,
    async_url,
    hang,
    hang_after_commit,
    payments_table,
)

logger = logging.getLogger(__name__)


def build(config: Config) -> tuple[FastStream, InboxMiddleware]:
    """The application: broker, guard, the payments handler."""
    engine = create_async_engine(async_url(config.db_url))
    sync_engine = create_engine(config.db_url)
    inbox = inboxguard.Inbox(
        sync_engine,
        retention=RETENTION,
        table_prefix=config.prefix,
        lock_timeout=config.lock_timeout,
    )
    inbox.create_schema()
    payments = payments_table(config.prefix)
    payments.metadata.create_all(sync_engine)
    guard = InboxMiddleware(
        inbox,
        consumer="payments",
        command_id="command_id",
        async_session_factory=async_sessionmaker(engine),
        max_attempts=config.max_attempts,
        retry_delay=config.retry_delay,
    )
    broker = make_broker(config, middlewares=[_delivery_log(config), guard])

    async def apply_payment(body: dict[str, Any]) -> dict[str, Any]:
        session = inboxguard.current_session()
        await session.execute(
            insert(payments).values(command_id=body["command_id"], amount=body["amount"])
        )
        if config.handler_delay:
            await asyncio.sleep(config.handler_delay.total_seconds())
        _hang_points(config, body["command_id"], session)
        return {"applied": body["amount"]}

    subscribe(broker, config, apply_payment)
    app = FastStream(broker)
    app.on_startup(lambda: guard.check_startup(broker))
    app.after_startup(lambda: print("ready", flush=True))
    return app, guard


def _hang_points(config: Config, command_id: str, session: AsyncSession) -> None:
    """Test hooks: stop the whole process for good inside the transaction, or
    right after its COMMIT with the ack not sent."""
    if command_id == config.hang_in_body:
        hang(command_id)
    if command_id == config.hang_before_ack:
        hang_after_commit(session.sync_session, command_id)


def _delivery_log(config: Config) -> Any:
    """A middleware (outside the guard) writing the delivery log, if asked."""
    path = config.delivery_log

    class DeliveryLog(BaseMiddleware):  # type: ignore[misc]
        async def consume_scope(self, call_next: Any, msg: Any) -> Any:
            if not path:
                return await call_next(msg)
            cid = _command_id(msg.body)
            position = _stream_position(msg)
            if position:
                logger.info("delivery %s %s", cid, position)
            with open(path, "a") as log:
                log.write(f"{cid}\n")
            try:
                return await call_next(msg)
            finally:
                with open(path, "a") as log:
                    log.write(f"+{cid}\n")

    return DeliveryLog


def _stream_position(msg: Any) -> str:
    """A JetStream delivery's stream sequence and delivery count, else ``""``."""
    try:
        meta = msg.raw_message.metadata
        return f"stream_seq={meta.sequence.stream} num_delivered={meta.num_delivered}"
    except Exception:  # not JetStream: no such metadata
        return ""


def _command_id(raw: Any) -> str:
    try:
        body = json.loads(raw)
    except (TypeError, ValueError):
        return "?"
    return str(body.get("command_id")) if isinstance(body, dict) else "None"


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    logger.setLevel(logging.INFO)  # the JetStream delivery lines, with a delivery log
    app, _ = build(Config())
    asyncio.run(app.run())


if __name__ == "__main__":
    main()
