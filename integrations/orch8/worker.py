"""The Orch8 worker: one payment row and one provider charge per order step.

The ``charge_order`` handler runs inside the inbox guard in an
``AsyncSession`` (asyncpg): it records the payment row and charges through
the effect ledger, keyed on the step (``params.idempotency_key`` when the
workflow sets one, else ``instance_id/block_id``), so a task the engine
offers again, or retries as a new task, neither writes a second row nor
charges twice. The inbox is built on a sync Engine of its own on the same
database (schema creation and the start-up checks).

Settings come from the environment: ``ORCH8_URL`` (the engine),
``INBOXGUARD_DB_URL`` (a PostgreSQL URL), ``INBOXGUARD_TABLE_PREFIX``,
``ORCH8_WORKER_ID``; ``main()`` charges a sandbox gateway in the same database
(``integrations.ledger.gateway``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orch8 import Orch8Client, WorkerTask
from sqlalchemy import create_engine, insert
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

import inboxguard
from inboxguard.adapters.orch8 import InboxWorker, execute_effect, guarded, step_id
from integrations.ledger.gateway import SandboxGateway
from integrations.payments import async_url, payments_table

#: The evidence horizon: longer than the block's retries and the reaper's timeout.
RETENTION = dt.timedelta(days=7)
#: The block's retry policy lets the engine retry a step for up to a day.
RETRY_WINDOW = dt.timedelta(days=1)
#: The engine re-offers a task whose worker sent no heartbeat for this long.
REAPER_WINDOW = dt.timedelta(minutes=5)

#: What only we know of the handler's guarantee table (the rest is derived).
TERMINAL_STATES = ("completed (one payment row, one charge)", "failed (quarantined)")
LOST_COMPLETION = (
    "step S commits and charges, and its completion is lost or refused as stale; the"
    " engine offers the task again (the reaper) and that run is a duplicate: it completes"
    " with the stored result, and the provider is not called again"
)


@dataclass(frozen=True)
class Config:
    """Where the engine and the database are."""

    engine_url: str = field(
        default_factory=lambda: os.environ.get("ORCH8_URL", "http://127.0.0.1:8080")
    )
    db_url: str = field(
        default_factory=lambda: os.environ.get(
            "INBOXGUARD_DB_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
        )
    )
    prefix: str = field(default_factory=lambda: os.environ.get("INBOXGUARD_TABLE_PREFIX", "orch8_"))
    worker_id: str = field(default_factory=lambda: os.environ.get("ORCH8_WORKER_ID", "worker-1"))
    poll_interval: float = 1.0
    heartbeat_interval: float = 30.0


@dataclass
class App:
    """The worker's parts (the tests look at each)."""

    config: Config
    inbox: inboxguard.Inbox
    ledger: inboxguard.EffectLedger
    engine: AsyncEngine
    handlers: dict[str, Any]

    def worker(
        self, client: Orch8Client, worker_id: str | None = None, *, max_concurrent: int = 5
    ) -> InboxWorker:
        """A polling worker over ``client`` running the guarded handlers."""
        return InboxWorker(
            client,
            worker_id or self.config.worker_id,
            self.handlers,
            poll_interval=self.config.poll_interval,
            heartbeat_interval=self.config.heartbeat_interval,
            max_concurrent=max_concurrent,
        )


def build(
    config: Config,
    provider: inboxguard.Provider,
    *,
    clock: Callable[[], dt.datetime] | None = None,
    lock_timeout: dt.timedelta = dt.timedelta(seconds=2),
) -> App:
    """The inbox, the ledger (``clock`` shared with the provider) and the
    guarded ``charge_order`` handler, with their tables created."""
    sync_engine = create_engine(config.db_url)
    inbox = inboxguard.Inbox(
        sync_engine, retention=RETENTION, table_prefix=config.prefix, lock_timeout=lock_timeout
    )
    inbox.create_schema()
    payments = payments_table(config.prefix)
    payments.metadata.create_all(sync_engine)
    ledger = inboxguard.EffectLedger(sync_engine, table_prefix=config.prefix, clock=clock)
    ledger.create_schema()
    engine = create_async_engine(async_url(config.db_url))

    async def charge_order(task: WorkerTask) -> dict[str, Any]:
        session = inboxguard.current_session()
        amount = int(task.params["amount"])
        await session.execute(insert(payments).values(command_id=step_id(task), amount=amount))
        receipt = await execute_effect(ledger, task, provider, {"amount": amount}, effect="charge")
        return {"charge": receipt.reference, "amount": amount}

    handler = guarded(
        charge_order,
        inbox,
        consumer="orch8-charges",
        session_factory=async_sessionmaker(engine),
        retry_window=RETRY_WINDOW,
        reaper_window=REAPER_WINDOW,
        guarantee=inboxguard.Guarantee(
            provider=provider,
            ledger=ledger,
            terminal_states=TERMINAL_STATES,
            lost_ack_example=LOST_COMPLETION,
        ),
    )
    return App(config, inbox, ledger, engine, {"charge_order": handler})


async def main() -> None:
    """Poll the engine until interrupted, charging the sandbox gateway."""
    logging.basicConfig(level=logging.INFO)
    config = Config()
    gateway = SandboxGateway(create_engine(config.db_url), table_prefix=config.prefix)
    gateway.create_schema()
    app = build(config, gateway)
    async with Orch8Client(config.engine_url) as client:
        await app.worker(client).start()


if __name__ == "__main__":
    asyncio.run(main())
