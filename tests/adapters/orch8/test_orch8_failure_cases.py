"""OR1-OR5: the seed's five failure cases through an Orch8 worker.

Each runs the reference worker (integrations/orch8) against the stand-in
engine (engine v0.7.1's worker protocol; claim epochs where parametrized) and
a real PostgreSQL, and asserts what a user cares about: the provider's
request and effect counts, the ledger's record and the step's final state.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading

import pytest

from inboxguard import EffectState
from inboxguard.testing import FaultPoint, crash_at
from tests.adapters.orch8.support import rig, until

pytestmark = pytest.mark.postgresql

ENGINES = [pytest.param(False, id="v0.7.1-404"), pytest.param(True, id="claim-epoch-409")]


def test_or1_worker_killed_after_the_provider_accepted(pg_url: str) -> None:
    """OR1: the worker dies after the provider applied the charge and before
    anything was recorded; once the reaper re-offers the task (same task ID)
    and the ledger's lease has lapsed, the next run finds the charge by lookup:
    one request, one effect, step completed with that charge."""

    async def scenario() -> None:
        async with rig(pg_url) as r:
            instance = r.step()
            with crash_at(FaultPoint.PROVIDER_ACCEPTED) as tap:
                async with r.worker():
                    await until(lambda: tap.crashes, "the crash after the provider accepted")
            assert r.provider.effects == 1
            assert r.ledger_state(instance) is EffectState.PREPARED
            assert r.last(instance)["state"] == "claimed"  # nobody completed or failed it
            r.clock.advance(dt.timedelta(minutes=1))  # the dead worker's ledger lease lapses
            r.standin.expire()
            async with r.worker("worker-2"):
                await until(lambda: r.last(instance)["state"] == "completed", "the step")
            tasks = r.standin.tasks(instance, "charge")
            assert len(tasks) == 1  # re-offered, never retried as a new task
            assert (r.provider.requests, r.provider.effects) == (1, 1)
            record = r.app.ledger.get(r.key(instance))
            assert record is not None
            assert record.state is EffectState.CONFIRMED
            assert record.receipt is not None
            assert tasks[0]["output"]["charge"] == record.receipt.reference
            assert r.payments(instance) == 1

    asyncio.run(scenario())


@pytest.mark.parametrize("loss", ["lost-completion", "killed-before-completion"])
def test_or2_same_task_delivered_to_two_workers(pg_url: str, loss: str) -> None:
    """OR2: worker 1 commits and its completion never reaches the engine (lost,
    or the worker dies first); the engine offers the same task to worker 2,
    whose run is a duplicate: it completes with the stored result, the
    handler and the provider are not called again, and nothing is failed."""

    async def scenario() -> None:
        async with rig(pg_url) as r:
            instance = r.step()
            if loss == "lost-completion":
                r.standin.lose_next("complete")
                async with r.worker("worker-1"):
                    await until(lambda: r.calls("complete", 503) == 1, "the lost completion")
            else:
                with crash_at(FaultPoint.BEFORE_ACK) as tap:
                    async with r.worker("worker-1"):
                        await until(lambda: tap.crashes, "the crash after the commit")
            assert r.payments(instance) == 1
            assert r.last(instance)["state"] == "claimed"
            r.standin.expire()
            async with r.worker("worker-2"):
                await until(lambda: r.last(instance)["state"] == "completed", "the step")
            task = r.last(instance)
            assert task["worker_id"] == "worker-2"
            assert r.calls("fail", 200, 404, 409, 503) == 0  # a lost completion is never a fail
            assert (r.provider.requests, r.provider.effects) == (1, 1)
            assert r.payments(instance) == 1
            record = r.app.ledger.get(r.key(instance))
            assert record is not None
            assert record.receipt is not None
            assert task["output"] == {"charge": record.receipt.reference, "amount": 100}

    asyncio.run(scenario())


@pytest.mark.parametrize("claim_epoch", ENGINES)
def test_or3_lease_expires_while_the_first_worker_still_runs(
    pg_url: str, claim_epoch: bool
) -> None:
    """OR3: worker 1 stalls after the provider answered; the engine re-offers
    its task to worker 2, whose guard waits on worker 1's claim and fails the
    task retryably (a new task, attempt 1). Worker 1 then commits; the engine
    refuses its completion as stale (404, or 409 with claim epochs) and the
    adapter sends no fail; the retry is a duplicate that completes with
    worker 1's stored result. One request, one effect, one payment row."""

    async def scenario() -> None:
        async with rig(pg_url, claim_epoch=claim_epoch) as r:
            stalled, release = threading.Event(), threading.Event()

            def stall(key: str) -> None:
                stalled.set()
                release.wait(30)

            r.provider.after_apply = stall
            instance = r.step()
            # one task at a time: worker 1 does not poll while its run stalls
            async with r.worker("worker-1", max_concurrent=1):
                await until(stalled.is_set, "worker 1 inside the provider call")
                first = r.last(instance)
                r.standin.expire(first["id"])
                async with r.worker("worker-2"):
                    await until(
                        lambda: r.calls("fail", 200) == 1, "the other worker's retryable fail"
                    )
                    assert r.standin.task(first["id"])["error_retryable"] is True
                    r.provider.after_apply = None
                    release.set()
                    stale = 409 if claim_epoch else 404
                    await until(lambda: r.calls("complete", stale) == 1, "the stale completion")
                    await until(lambda: r.last(instance)["state"] == "completed", "the step")
            tasks = r.standin.tasks(instance, "charge")
            assert [t["attempt"] for t in tasks] == [0, 1]
            assert tasks[0]["state"] == "failed"
            assert tasks[0]["worker_id"] == "worker-2"
            assert r.calls("fail", 404, 409) == 0  # the stale completion was not turned into a fail
            assert (r.provider.requests, r.provider.effects) == (1, 1)
            assert r.payments(instance) == 1
            record = r.app.ledger.get(r.key(instance))
            assert record is not None
            assert record.state is EffectState.CONFIRMED
            assert record.receipt is not None
            assert tasks[1]["output"]["charge"] == record.receipt.reference

    asyncio.run(scenario())


def test_or3_a_restarted_worker_reusing_its_worker_id(pg_url: str) -> None:
    """OR3: on v0.7.1 a restarted worker that reuses its ``worker_id`` claims
    the task again, and the engine cannot tell its runs apart: the stalled
    first run's late completion is accepted. The inbox makes that harmless:
    the second run waits on the first's claim, sees a duplicate and sends the
    same stored result (refused, as the task is completed); nothing is failed
    and the provider is called once."""

    async def scenario() -> None:
        async with rig(pg_url, lock_timeout=dt.timedelta(seconds=20)) as r:
            stalled, release = threading.Event(), threading.Event()

            def stall(key: str) -> None:
                stalled.set()
                release.wait(30)

            r.provider.after_apply = stall
            instance = r.step()
            async with r.worker("worker-1", max_concurrent=1):
                await until(stalled.is_set, "the first run inside the provider call")
                first = r.last(instance)
                r.standin.expire(first["id"])
                async with r.worker("worker-1"):  # the same worker, restarted
                    await until(
                        lambda: r.standin.task(first["id"])["claim_epoch"] == 2, "the new claim"
                    )
                    r.provider.after_apply = None
                    release.set()
                    await until(lambda: r.calls("complete", 404) == 1, "the second completion")
            (task,) = r.standin.tasks(instance, "charge")
            assert task["state"] == "completed"
            assert r.calls("complete", 200) == 1  # the first run's, accepted though stale
            assert r.calls("fail", 200, 404) == 0
            assert (r.provider.requests, r.provider.effects) == (1, 1)
            assert r.payments(instance) == 1
            record = r.app.ledger.get(r.key(instance))
            assert record is not None
            assert record.receipt is not None
            assert task["output"]["charge"] == record.receipt.reference

    asyncio.run(scenario())


def test_or4_retry_after_the_providers_idempotency_window(pg_url: str) -> None:
    """OR4: the charge's answer is lost; the engine's retry comes after the
    provider's idempotency window, and the provider has no lookup. Nothing is
    re-sent: the ledger keeps the effect unknown, the task is quarantined and
    failed for good (not retryable), and an operator settles it."""

    async def scenario() -> None:
        window = dt.timedelta(hours=1)
        # the engine holds the retry back until the test releases it
        async with rig(pg_url, window=window, lookup=False, retry_backoff=window) as r:
            r.provider.fail_next("accept_then_timeout")
            instance = r.step()
            async with r.worker():
                await until(lambda: r.calls("fail", 200) == 1, "the first attempt's fail")
            assert r.standin.tasks(instance, "charge")[0]["error_retryable"] is True
            r.clock.advance(window + dt.timedelta(minutes=1))
            r.standin.release_retries()
            async with r.worker("worker-2"):
                await until(lambda: r.last(instance)["state"] == "failed", "the second attempt")
            tasks = r.standin.tasks(instance, "charge")
            assert [t["attempt"] for t in tasks] == [0, 1]
            assert tasks[1]["error_retryable"] is False
            assert (r.provider.requests, r.provider.effects) == (1, 1)
            record = r.app.ledger.get(r.key(instance))
            assert record is not None
            assert record.state is EffectState.UNKNOWN
            assert r.payments(instance) == 0
            (quarantined,) = r.app.inbox.quarantined("orch8-charges")
            assert quarantined.command_id == f"{instance}/charge"
            assert quarantined.reason == "reconciliation_required"

    asyncio.run(scenario())


def test_or5_one_effect_and_one_receipt_per_step(pg_url: str) -> None:
    """OR5: a dozen steps through two workers while the provider loses answers
    and the engine loses completions: at the end every step is completed with
    one payment row, one effect at the provider under its key and one
    receipt in the ledger, the same one the task's output carries."""

    async def scenario() -> None:
        async with rig(pg_url, max_attempts=5) as r:
            r.provider.fail_next("accept_then_timeout", 3)
            r.standin.lose_next("complete", 3)
            instances = [r.step(amount=100 + n) for n in range(12)]

            def completed() -> int:
                return sum(r.last(i)["state"] == "completed" for i in instances)

            async with r.worker("worker-1"), r.worker("worker-2"):
                await until(lambda: r.calls("complete", 503) == 3, "three lost completions")
                await until(lambda: completed() == 9, "every other step")
                r.standin.expire()
                await until(lambda: completed() == 12, "every step")
            for n, instance in enumerate(instances):
                assert r.provider.effects_for(r.key(instance)) == 1
                assert r.payments(instance) == 1
                record = r.app.ledger.get(r.key(instance))
                assert record is not None
                assert record.receipt is not None
                assert record.state in (EffectState.CONFIRMED, EffectState.RECONCILED)
                assert r.last(instance)["output"] == {
                    "charge": record.receipt.reference,
                    "amount": 100 + n,
                }
            assert r.provider.effects == 12
            assert r.calls("fail", 200) == 3  # the three lost answers, retried as new tasks

    asyncio.run(scenario())
