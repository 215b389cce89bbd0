"""OR6-OR9, OR11: what the guarded handler does with each outcome.

Handlers of their own (beside the reference worker's) on the rig's inbox,
PostgreSQL and the stand-in engine.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest
from orch8 import Orch8Client, WorkerTask
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.orch8 import InboxWorker, guarded
from inboxguard.adapters.orch8._task import _heartbeats
from inboxguard.guarantees import contradictions_of, guarantees_markdown, guarantees_of
from inboxguard.testing.orch8 import StandInEngine
from integrations.payments import payments_table
from tests.adapters.orch8.support import Rig, rig, until
from tests.conftest import unique

pytestmark = pytest.mark.postgresql

DAY = dt.timedelta(days=1)
MINUTE = dt.timedelta(minutes=1)


class DeclinedError(Exception):
    """A handler's own error that says whether the engine may retry it."""

    def __init__(self, retryable: bool) -> None:
        super().__init__(f"declined (retryable={retryable})")
        self.retryable = retryable


def _add(r: Rig, name: str, params: Any, instance: str | None = None) -> str:
    instance = instance or unique("wf")
    r.standin.add_task(name, instance_id=instance, block_id="b", params=params)
    return instance


async def _run(r: Rig, handlers: dict[str, Any], done: Any, **options: Any) -> None:
    async with Orch8Client(r.standin.url) as client:
        worker = InboxWorker(client, "w", handlers, poll_interval=0.02, **options)
        running = asyncio.create_task(worker.start())
        try:
            await until(done, "the tasks to settle")
        finally:
            await worker.stop(timeout=5)
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)


def _record(r: Rig, runs: list[str]) -> Any:
    payments = payments_table(r.app.config.prefix)

    async def record(task: WorkerTask) -> dict[str, Any]:
        runs.append(task.id)
        session = inboxguard.current_session()
        cid = f"{task.instance_id}/{task.block_id}"
        await session.execute(insert(payments).values(command_id=cid, amount=1))
        return {"ran": task.id}

    return record


def test_or6_payload_mismatch_fails_the_task_for_good(pg_url: str) -> None:
    """OR6: a second task for the same step with other params is quarantined
    and failed non-retryably; the handler does not run for it."""

    async def scenario() -> None:
        async with rig(pg_url) as r:
            runs: list[str] = []
            handler = guarded(
                _record(r, runs),
                r.app.inbox,
                consumer="or6",
                session_factory=async_sessionmaker(r.app.engine),
                retry_window=DAY,
                reaper_window=MINUTE,
            )
            instance = _add(r, "h", {"amount": 1})
            _add(r, "h", {"amount": 2}, instance)
            tasks = lambda: r.standin.tasks(instance, "b")  # noqa: E731
            settled = lambda: [t["state"] for t in tasks()] == ["completed", "failed"]  # noqa: E731
            await _run(r, {"h": handler}, settled, max_concurrent=1)  # one task, then the next
            first, second = tasks()
            assert first["state"] == "completed"
            assert first["output"] == {"ran": first["id"]}
            assert second["error_retryable"] is False
            assert len(tasks()) == 2  # not retried
            assert runs == [first["id"]]
            (record,) = r.app.inbox.quarantined("or6")
            assert (record.command_id, record.reason) == (f"{instance}/b", "payload_mismatch")

    asyncio.run(scenario())


def test_or7_no_usable_command_id(pg_url: str) -> None:
    """OR7: a task without the params key its command ID comes from is
    quarantined under its task ID and failed non-retryably; nothing runs."""

    async def scenario() -> None:
        async with rig(pg_url) as r:
            runs: list[str] = []
            handler = guarded(
                _record(r, runs),
                r.app.inbox,
                consumer="or7",
                session_factory=async_sessionmaker(r.app.engine),
                command_id="order_key",
                repeats=True,
                retry_window=DAY,
                reaper_window=MINUTE,
            )
            instance = _add(r, "h", {"amount": 1})
            task = r.standin.tasks(instance)[0]
            await _run(r, {"h": handler}, lambda: r.standin.task(task["id"])["state"] == "failed")
            assert r.standin.task(task["id"])["error_retryable"] is False
            assert runs == []
            (record,) = r.app.inbox.quarantined("or7")
            assert record.command_id == f"message:{task['id']}"
            assert record.reason == "invalid_command"

    asyncio.run(scenario())


@pytest.mark.parametrize("retryable", [True, False])
def test_or8_the_handlers_own_exception_says_whether_to_retry(pg_url: str, retryable: bool) -> None:
    """OR8: a handler's exception rolls its transaction back and fails the task,
    retryable exactly when the exception says so (the SDK's own rule); a
    retry runs the handler again because nothing committed."""

    async def scenario() -> None:
        async with rig(pg_url) as r:
            runs: list[str] = []
            record = _record(r, runs)

            async def flaky(task: WorkerTask) -> dict[str, Any]:
                out = await record(task)
                if task.attempt == 0:
                    raise DeclinedError(retryable)
                return out

            handler = guarded(
                flaky,
                r.app.inbox,
                consumer="or8",
                session_factory=async_sessionmaker(r.app.engine),
                retry_window=DAY,
                reaper_window=MINUTE,
            )
            instance = _add(r, "h", {"amount": 1})
            final = "completed" if retryable else "failed"
            await _run(r, {"h": handler}, lambda: r.standin.step_state(instance, "b") == final)
            tasks = r.standin.tasks(instance, "b")
            assert tasks[0]["error_retryable"] is retryable
            assert len(tasks) == (2 if retryable else 1)
            assert len(runs) == len(tasks)
            assert r.payments(instance) == 0  # the rig counts <instance>/charge rows only
            assert r.app.inbox.quarantined("or8") == []

    asyncio.run(scenario())


def test_or9_heartbeats_keep_the_claim_while_the_handler_runs(pg_url: str) -> None:
    """OR9: the adapter heartbeats while the handler runs, so a run longer than
    the reaper's timeout keeps its task: one task, completed, never re-offered."""

    async def scenario() -> None:
        async with rig(pg_url) as r:
            r.standin.reap_after = dt.timedelta(milliseconds=300)

            async def slow(task: WorkerTask) -> str:
                await until(lambda: r.calls("heartbeat", 200) >= 3, "three heartbeats")
                return "done"

            handler = guarded(
                slow,
                r.app.inbox,
                consumer="or9",
                session_factory=async_sessionmaker(r.app.engine),
                retry_window=DAY,
                reaper_window=dt.timedelta(milliseconds=300),
            )
            instance = _add(r, "h", {})
            await _run(
                r,
                {"h": handler},
                lambda: r.standin.step_state(instance, "b") == "completed",
                heartbeat_interval=0.05,
            )
            (task,) = r.standin.tasks(instance, "b")
            assert task["output"] == "done"
            assert r.calls("poll", 200) >= 1
            assert r.calls("complete", 200) == 1

    asyncio.run(scenario())


def test_or11_sync_sessions_keep_the_same_contract(pg_url: str) -> None:
    """OR11: a plain handler in a sync Session (run in a thread): committed
    once; after a lost completion the re-offered task completes with the
    stored result and the handler does not run again."""

    async def scenario() -> None:
        async with rig(pg_url) as r:
            payments = payments_table(r.app.config.prefix)
            runs: list[str] = []

            def record(task: WorkerTask) -> dict[str, Any]:
                runs.append(task.id)
                cid = f"{task.instance_id}/charge"
                inboxguard.current_session().execute(
                    insert(payments).values(command_id=cid, amount=1)
                )
                return {"ran": len(runs)}

            handler = guarded(
                record,
                r.app.inbox,
                consumer="or11",
                sync_session_factory=sessionmaker(r.app.inbox.engine),
                retry_window=DAY,
                reaper_window=MINUTE,
            )
            instance = unique("wf")
            r.standin.add_task("h", instance_id=instance, block_id="charge", params={"a": 1})
            r.standin.lose_next("complete")
            await _run(r, {"h": handler}, lambda: r.calls("complete", 503) == 1)
            r.standin.expire()
            await _run(r, {"h": handler}, lambda: r.last(instance)["state"] == "completed")
            assert r.last(instance)["output"] == {"ran": 1}
            assert len(runs) == 1
            assert r.payments(instance) == 1
            assert r.calls("fail", 200, 404, 409) == 0

    asyncio.run(scenario())


def test_or9_a_heartbeat_refused_as_stale_stops_the_heartbeats() -> None:
    """OR9: once the engine answers a heartbeat 404 (another worker holds the
    task now), the adapter stops heartbeating for that run instead of
    hammering the engine."""

    async def scenario() -> None:
        with StandInEngine() as standin:
            standin.add_task("h")
            async with Orch8Client(standin.url) as client:
                (task,) = await client.poll_tasks("h", "w1")
                standin.expire()
                assert len(await client.poll_tasks("h", "w2")) == 1
                await asyncio.wait_for(_heartbeats(client, task, "w1", 0.01), 30)
            assert standin.calls[("heartbeat", 404)] == 1
            assert standin.calls[("heartbeat", 200)] == 0

    asyncio.run(scenario())


def test_the_reference_workers_guarantee_table(pg_url: str) -> None:
    """The reference worker's guarantee table is derived without a
    contradiction: at-least-once delivery, the step identity, both declared
    windows inside the horizon, the ledger and the provider's window."""

    async def scenario() -> None:
        async with rig(pg_url) as r:
            assert contradictions_of(r.app.inbox) == []
            (table,) = guarantees_of(r.app.inbox)
            text = guarantees_markdown([table])
            assert "at least once: the engine offers a task again" in text
            assert "step identity (instance_id/block_id)" in text
            assert "orch8_retry_window 1d, orch8_reaper_window 5m" in text
            assert "the stored result" in text  # the declared lost-completion example

    asyncio.run(scenario())
