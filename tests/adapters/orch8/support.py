"""The Orch8 suite's rig: the reference worker (integrations/orch8) on a real
PostgreSQL, the stand-in engine, a fake provider and a clock the ledger and the
provider share; workers run in this test's event loop."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from orch8 import Orch8Client
from sqlalchemy import func, select

from inboxguard import EffectState
from inboxguard._core.clock import utc_now
from inboxguard.adapters.orch8 import InboxWorker
from inboxguard.testing import FakeProvider, ManualClock
from inboxguard.testing.orch8 import StandInEngine
from integrations.orch8.worker import App, Config, build
from integrations.payments import payments_table
from tests.conftest import unique

HANDLER = "charge_order"
#: Waits are bounded by a deadline, never by a sleep.
DEADLINE = 60.0


@dataclass
class Rig:
    """Everything one test looks at."""

    app: App
    standin: StandInEngine
    provider: FakeProvider
    clock: ManualClock

    def step(self, amount: int = 100, **params: Any) -> str:
        """Queue one order step; return its instance ID."""
        instance = unique("wf")
        self.standin.add_task(
            HANDLER, instance_id=instance, block_id="charge", params={"amount": amount, **params}
        )
        return instance

    def payments(self, instance: str) -> int:
        """Payment rows the handler committed for the step."""
        table = payments_table(self.app.config.prefix)
        with self.app.inbox.engine.connect() as conn:
            query = select(func.count()).where(table.c.command_id == f"{instance}/charge")
            return int(conn.execute(query).scalar_one())

    def key(self, instance: str) -> str:
        """The ledger key of the step's charge."""
        return f"{instance}/charge/charge"

    def ledger_state(self, instance: str) -> EffectState | None:
        """The state of the step's charge in the ledger (None: no record)."""
        record = self.app.ledger.get(self.key(instance))
        return None if record is None else record.state

    def last(self, instance: str) -> dict[str, Any]:
        """The step's latest task, as the engine holds it."""
        return self.standin.tasks(instance, "charge")[-1]

    def calls(self, action: str, *statuses: int) -> int:
        """Requests of ``action`` the engine answered with one of ``statuses``."""
        return sum(n for (a, s), n in self.standin.calls.items() if a == action and s in statuses)

    @asynccontextmanager
    async def worker(
        self, worker_id: str = "worker-1", max_concurrent: int = 5
    ) -> AsyncIterator[InboxWorker]:
        """A running InboxWorker; stopped (in-flight tasks cancelled) on exit."""
        async with Orch8Client(self.standin.url) as client:
            worker = self.app.worker(client, worker_id, max_concurrent=max_concurrent)
            running = asyncio.create_task(worker.start())
            try:
                yield worker
            finally:
                await worker.stop(timeout=5)
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)


async def until(condition: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    """Wait for ``condition`` with a deadline; fail naming ``what``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not condition():
        if loop.time() > end:
            msg = f"timed out after {timeout}s waiting for {what}"
            raise AssertionError(msg)
        await asyncio.sleep(0.02)


@asynccontextmanager
async def rig(
    pg_url: str,
    *,
    claim_epoch: bool = False,
    max_attempts: int = 3,
    retry_backoff: dt.timedelta = dt.timedelta(0),
    lock_timeout: dt.timedelta = dt.timedelta(milliseconds=500),
    **provider: Any,
) -> AsyncIterator[Rig]:
    """The rig on its own table prefix, the stand-in serving; torn down on exit."""
    clock = ManualClock(utc_now())
    fake = FakeProvider(clock=clock, **provider)
    with StandInEngine(
        claim_epoch=claim_epoch, max_attempts=max_attempts, retry_backoff=retry_backoff
    ) as standin:
        config = replace(
            Config(),
            engine_url=standin.url,
            db_url=pg_url,
            prefix=unique("o8_"),
            poll_interval=0.02,
        )
        app = build(config, fake, clock=clock, lock_timeout=lock_timeout)
        try:
            yield Rig(app, standin, fake, clock)
        finally:
            await app.engine.dispose()
            app.inbox.engine.dispose()
