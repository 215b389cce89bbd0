"""The aio-pika consumer: applies each payment command once, on asyncio end to end.

The inbox is built on a sync Engine of its own on the same database (psycopg
or sqlite3, for schema creation and inspection); the guard writes through the
AsyncEngine's sessions. An ``AsyncEngine.sync_engine`` would be refused: its
synchronous calls cannot run on an async driver.
``INBOXGUARD_HANG_IN_BODY`` and ``INBOXGUARD_HANG_BEFORE_ACK`` (see
``integrations/payments.py``) stop it at a known point for the kill tests.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aio_pika
from aio_pika.abc import AbstractExchange, AbstractIncomingMessage
from sqlalchemy import create_engine, insert
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

import inboxguard
from inboxguard.adapters.aio_pika import guarded
from integrations.payments import (
    RETENTION,
    Config,
    async_url,
    hang,
    hang_after_commit,
    payments_table,
)


async def make_inbox(engine: AsyncEngine, config: Config) -> inboxguard.Inbox:
    """The inbox on a sync Engine of the same database, with its tables and the
    app's table created through the AsyncEngine."""
    inbox = inboxguard.Inbox(
        create_engine(config.db_url),
        retention=RETENTION,
        table_prefix=config.prefix,
        lock_timeout=config.lock_timeout,
    )
    async with engine.begin() as conn:
        await conn.run_sync(inbox.tables.metadata.create_all)
        await conn.run_sync(payments_table(config.prefix).metadata.create_all)
    return inbox


#: What only we know of the consumer's guarantee table; the rest is derived
#: (`inboxguard guarantees --app 'integrations.asyncio.consumer:build()'`,
#: checked against integrations/asyncio/guarantees.lock by the test suite).
GUARANTEE = inboxguard.Guarantee(
    no_external_effect=True, terminal_states=("paid (one payment row)", "quarantined")
)


def subscribe(
    config: Config, inbox: inboxguard.Inbox, engine: AsyncEngine, exchange: AbstractExchange
) -> Callable[[AbstractIncomingMessage], Awaitable[None]]:
    """The guarded callback: one payment row per command, retried copies
    published to ``exchange``."""
    payments = payments_table(config.prefix)

    async def apply_payment(body: dict[str, Any], message: AbstractIncomingMessage) -> Any:
        session = inboxguard.current_session()
        await session.execute(
            insert(payments).values(command_id=body["command_id"], amount=body["amount"])
        )
        if config.handler_delay:
            await asyncio.sleep(config.handler_delay.total_seconds())
        _hang_points(config, body["command_id"], session)
        return {"applied": body["amount"]}

    return guarded(
        apply_payment,
        inbox,
        session_factory=async_sessionmaker(engine),
        command_id="command_id",
        consumer="payments",
        exchange=exchange,
        queue=config.queue,
        max_attempts=config.max_attempts,
        retry_delay=config.retry_delay,
        guarantee=GUARANTEE,
    )


async def build() -> inboxguard.Inbox:
    """The consumer's inbox with its callback declared on a real channel's
    exchange, without consuming (what ``inboxguard guarantees`` reads)."""
    config = Config()
    inbox = inboxguard.Inbox(
        create_engine(config.db_url),
        retention=RETENTION,
        table_prefix=config.prefix,
        lock_timeout=config.lock_timeout,
    )
    connection = await aio_pika.connect_robust(config.broker_url)
    async with connection:
        channel = await connection.channel()
        subscribe(
            config, inbox, create_async_engine(async_url(config.db_url)), channel.default_exchange
        )
    return inbox


async def main() -> None:
    config = Config()
    engine = create_async_engine(async_url(config.db_url))
    inbox = await make_inbox(engine, config)

    connection = await aio_pika.connect_robust(config.broker_url)
    async with connection:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=10)
        queue = await channel.declare_queue(config.queue, durable=True)
        callback = subscribe(config, inbox, engine, channel.default_exchange)

        async def on_message(message: AbstractIncomingMessage) -> None:
            if config.delivery_log:
                with open(config.delivery_log, "a") as log:
                    log.write(f"{_command_id(message.body)}\n")
            await callback(message)
            if config.delivery_log:
                with open(config.delivery_log, "a") as log:
                    log.write(f"+{_command_id(message.body)}\n")

        await queue.consume(on_message)
        print("ready", flush=True)
        await asyncio.Future()


def _hang_points(config: Config, command_id: str, session: AsyncSession) -> None:
    """Test hooks: stop the whole process (the event loop included) for good
    inside the transaction, or right after its COMMIT with the ack not sent."""
    if command_id == config.hang_in_body:
        hang(command_id)
    if command_id == config.hang_before_ack:
        hang_after_commit(session.sync_session, command_id)


def _command_id(raw: bytes) -> str:
    try:
        return str(json.loads(raw).get("command_id"))
    except ValueError:
        return "?"


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main())
