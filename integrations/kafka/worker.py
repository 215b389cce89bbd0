"""The Kafka worker: applies each payment command once, whatever Kafka redelivers.

One record per transaction, or one polled batch per transaction with
``INBOXGUARD_KAFKA_BATCH=1``; ``INBOXGUARD_KAFKA_WATERMARKS=1`` records each
partition's offset as a watermark in the same transaction;
``INBOXGUARD_KAFKA_SESSION_TIMEOUT_MS`` and ``INBOXGUARD_KAFKA_HEARTBEAT_MS``
set the group's timeouts (6000 and 1000). Refused payments
go to the ``<topic>.dlq`` topic. ``INBOXGUARD_HANG_IN_BODY`` and
``INBOXGUARD_HANG_BEFORE_ACK`` (see ``integrations/payments.py``) stop it
inside the transaction, or after its commit with the offset not committed,
for the kill tests; ``INBOXGUARD_DELIVERY_LOG`` records each delivery (``ID``
when it starts, ``+ID`` once its transaction ended).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from sqlalchemy import create_engine, insert
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

import inboxguard
from inboxguard.adapters.kafka import GuardedConsumer
from integrations.kafka.topics import (
    GROUP,
    bootstrap,
    dead_letter_topic,
    declare,
    group_timeouts,
)
from integrations.payments import (
    RETENTION,
    Config,
    async_url,
    hang,
    hang_after_commit,
    payments_table,
)

logger = logging.getLogger(__name__)


#: What only we know of the consumer's guarantee table; the rest is derived
#: (``inboxguard guarantees --app 'integrations.kafka.worker:build()'``).
GUARANTEE = inboxguard.Guarantee(
    no_external_effect=True, terminal_states=("paid (one payment row)", "quarantined")
)


def guard(
    config: Config, inbox: inboxguard.Inbox, engine: AsyncEngine, producer: AIOKafkaProducer
) -> GuardedConsumer:
    """The guarded consumer of the payments topic (not started)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap(config),
        group_id=GROUP,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **group_timeouts(),
    )
    return GuardedConsumer(
        consumer,
        inbox,
        name="payments",
        topics=[config.queue],
        session_factory=async_sessionmaker(engine, expire_on_commit=False),
        command_id="command_id",
        max_attempts=config.max_attempts,
        retry_delay=config.retry_delay,
        producer=producer,
        dead_letter_topic=dead_letter_topic(config),
        watermarks=os.environ.get("INBOXGUARD_KAFKA_WATERMARKS") == "1",
        max_records=int(os.environ.get("INBOXGUARD_KAFKA_MAX_RECORDS", "20")),
        guarantee=GUARANTEE,
    )


def _inbox(config: Config) -> inboxguard.Inbox:
    return inboxguard.Inbox(
        create_engine(config.db_url),
        retention=RETENTION,
        table_prefix=config.prefix,
        lock_timeout=config.lock_timeout,
    )


async def build() -> inboxguard.Inbox:
    """The worker's inbox with its consumer declared, neither started nor
    connected (what ``inboxguard guarantees`` reads)."""
    config = Config()
    inbox = _inbox(config)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap(config), acks="all")
    guarded = guard(config, inbox, create_async_engine(async_url(config.db_url)), producer)
    await guarded.consumer.stop()  # closes the client it never opened
    await producer.stop()
    return inbox


async def serve(config: Config) -> None:
    """Consume until SIGTERM."""
    engine = create_async_engine(async_url(config.db_url))
    inbox = _inbox(config)
    inbox.create_schema()
    payments = payments_table(config.prefix)
    payments.metadata.create_all(inbox.engine)
    await declare(config)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap(config), acks="all")
    await producer.start()
    guarded = guard(config, inbox, engine, producer)
    consumer = guarded.consumer
    log = _Log(config.delivery_log)

    async def apply(body: dict[str, Any], _record: Any) -> dict[str, Any]:
        session = inboxguard.current_session()
        log.start([body])
        try:
            await _pay(config, session, body, payments)
        finally:
            log.settled([body])
        return {"applied": body["amount"]}

    async def apply_batch(batch: inboxguard.InboxBatch, _records: Sequence[Any]) -> None:
        session = inboxguard.current_session()
        bodies = [entry.payload for entry in batch.fresh]
        log.start(bodies)
        try:
            for entry in batch.fresh:
                await _pay(config, session, entry.payload, payments)
                entry.result = {"applied": entry.payload["amount"]}
        finally:
            log.settled(bodies)

    await guarded.start()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, guarded.stop)
    print("ready", flush=True)
    try:
        if os.environ.get("INBOXGUARD_KAFKA_BATCH") == "1":
            await guarded.run_batch(apply_batch)
        else:
            await guarded.run(apply)
    finally:
        await consumer.stop()
        await producer.stop()
        await engine.dispose()


async def _pay(config: Config, session: AsyncSession, body: Any, payments: Any) -> None:
    await session.execute(
        insert(payments).values(command_id=body["command_id"], amount=body["amount"])
    )
    if config.handler_delay:
        await asyncio.sleep(config.handler_delay.total_seconds())
    command_id = body["command_id"]
    if command_id == config.hang_in_body:
        hang(command_id)
    if command_id == config.hang_before_ack:
        hang_after_commit(session.sync_session, command_id)


class _Log:
    """The delivery log: ``ID`` when a command's handler starts, ``+ID`` when it ends."""

    def __init__(self, path: str | None) -> None:
        self.path = path

    def start(self, bodies: Sequence[Any]) -> None:
        self._write(bodies, "")

    def settled(self, bodies: Sequence[Any]) -> None:
        self._write(bodies, "+")

    def _write(self, bodies: Sequence[Any], mark: str) -> None:
        if not self.path or not bodies:
            return
        with open(self.path, "a") as out:
            out.writelines(f"{mark}{json.dumps(b.get('command_id'))[1:-1]}\n" for b in bodies)


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("inboxguard.kafka").setLevel(logging.INFO)  # duplicates and seeks
    asyncio.run(serve(Config()))


if __name__ == "__main__":
    main()
