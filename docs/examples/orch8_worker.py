"""An Orch8 step that succeeds after its completion was lost, and one that stays unknown.

Runs against the stand-in engine (a test double of engine v0.7.1's worker
protocol) on SQLite: the inbox in one file, the effect ledger in another
(SQLite has one writer at a time, and the ledger commits on its own while
the guarded transaction is open).
"""

import asyncio
import datetime as dt
import tempfile
from pathlib import Path

from orch8 import Orch8Client, WorkerTask
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

import inboxguard
from inboxguard.adapters.orch8 import InboxWorker, execute_effect, guarded
from inboxguard.testing import FakeProvider, ManualClock
from inboxguard.testing.orch8 import StandInEngine

here = Path(tempfile.mkdtemp())
clock = ManualClock()  # the ledger's and the provider's time
provider = FakeProvider(clock=clock, window=dt.timedelta(hours=1), lookup=False)

# --8<-- [start:handler]
inbox = inboxguard.Inbox(
    create_engine(f"sqlite:///{here / 'app.db'}"), retention=dt.timedelta(days=7)
)
inbox.create_schema()
ledger = inboxguard.EffectLedger(create_engine(f"sqlite:///{here / 'ledger.db'}"), clock=clock)
ledger.create_schema()
sessions = async_sessionmaker(create_async_engine(f"sqlite+aiosqlite:///{here / 'app.db'}"))


async def charge(task: WorkerTask) -> dict:
    # the ledger key is the step's (params.idempotency_key, else instance_id/block_id)
    receipt = await execute_effect(ledger, task, provider, {"amount": task.params["amount"]})
    return {"charge": receipt.reference}


handlers = {
    "charge": guarded(
        charge,
        inbox,
        consumer="charges",
        session_factory=sessions,
        retry_window=dt.timedelta(hours=6),  # the block's retry policy
        reaper_window=dt.timedelta(minutes=5),  # the engine's timeout for a quiet worker
    )
}
# --8<-- [end:handler]


async def work(engine: StandInEngine, done) -> None:
    """Run one InboxWorker until ``done()`` (with a deadline)."""
    async with Orch8Client(engine.url) as client:
        worker = InboxWorker(client, "worker-1", handlers, poll_interval=0.02)
        running = asyncio.create_task(worker.start())
        try:
            async with asyncio.timeout(60):
                while not done():
                    await asyncio.sleep(0.02)
        finally:
            await worker.stop(timeout=5)
            running.cancel()


async def main() -> None:
    # retries wait an hour in the engine, until the example releases them
    with StandInEngine(retry_backoff=dt.timedelta(hours=1)) as engine:
        # --8<-- [start:lost-completion]
        engine.add_task("charge", instance_id="order-1", block_id="charge", params={"amount": 5})
        engine.lose_next("complete")  # committed and charged; the engine never hears of it
        await work(engine, lambda: engine.calls[("complete", 503)] == 1)
        assert engine.step_state("order-1", "charge") == "claimed"  # not failed by the adapter

        engine.expire()  # the reaper offers the same task again
        await work(engine, lambda: engine.step_state("order-1", "charge") == "completed")
        assert engine.tasks("order-1")[-1]["output"] == {"charge": "fx_1"}  # the stored result
        assert provider.requests == 1  # the second run was a duplicate: no second charge
        # --8<-- [end:lost-completion]

        # --8<-- [start:stays-unknown]
        engine.add_task("charge", instance_id="order-2", block_id="charge", params={"amount": 7})
        provider.fail_next("accept_then_timeout")  # charged, but the answer is lost
        await work(engine, lambda: engine.calls[("fail", 200)] == 1)  # failed retryably

        clock.advance(dt.timedelta(hours=2))  # the retry comes after the provider's 1 h window
        engine.release_retries()
        await work(engine, lambda: engine.step_state("order-2", "charge") == "failed")
        assert provider.requests == 2  # one per order: nothing was re-sent
        assert ledger.get("order-2/charge").state == inboxguard.EffectState.UNKNOWN
        (refused,) = inbox.quarantined("charges")
        assert refused.reason == "reconciliation_required"  # an operator settles it
        # --8<-- [end:stays-unknown]


asyncio.run(main())
