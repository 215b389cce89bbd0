"""One guarded Orch8 task: its command ID, its transaction, and its step.

The task is completed or failed here, with the SDK's client, and never by the
SDK's worker loop: that loop turns a failed completion into a ``fail``, which
would fail a step whose changes already committed. The delivery script
(:func:`~inboxguard.adapters._script.deliver`) decides the step; ``_settle``
holds the engine's verb for each.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from orch8 import Orch8Client, Orch8Error, WorkerTask

from inboxguard import Inbox
from inboxguard._core import faults
from inboxguard.adapters._drive import drive_async
from inboxguard.adapters._evidence import Refused, record_refusal, record_refusal_async
from inboxguard.adapters._outcome import log_requeued
from inboxguard.adapters._script import Reading, Record, Rules, Run, Settlement, Step, deliver
from inboxguard.adapters._stores import transaction
from inboxguard.adapters._transaction import transaction_async
from inboxguard.adapters.orch8._settle import STALE_STATUSES, Report, step_id
from inboxguard.errors import ConfigurationError, InvalidCommandError

__all__ = ["GuardedTask", "IdSpec"]

logger = logging.getLogger("inboxguard.orch8")

#: None (the step identity), a key of ``params``, or a callable over the task.
IdSpec = str | Callable[[WorkerTask], object] | None


def params_key(key: str) -> Callable[[WorkerTask], object]:
    """A getter of ``task.params[key]`` that refuses a task without it."""

    def get(task: WorkerTask) -> object:
        params = task.params
        value = params.get(key) if isinstance(params, Mapping) else None
        if value is None or value == "":
            msg = f"task {task.id} has no params[{key!r}] to take its command ID from"
            raise InvalidCommandError(msg)
        return value

    get.__qualname__ = f"params[{key!r}]"
    return get


class GuardedTask:
    """An Orch8 handler run once per command inside an inbox guard (see
    :func:`inboxguard.adapters.orch8.guarded`); :class:`InboxWorker` runs it."""

    def __init__(  # noqa: PLR0913 - one setting per argument, all checked by guarded()
        self,
        handler: Callable[[WorkerTask], Any],
        inbox: Inbox,
        *,
        consumer: str,
        session_factory: Callable[[], Any] | None,
        sync_session_factory: Callable[[], Any] | None,
        command_id: IdSpec,
        exclude: Iterable[str],
        retry_window: dt.timedelta,
        reaper_window: dt.timedelta,
    ) -> None:
        self.handler = handler
        self.inbox = inbox
        self.consumer = consumer
        self.session_factory = session_factory
        self.sync_session_factory = sync_session_factory
        self.command_id = command_id
        self.exclude = tuple(exclude)
        self.retry_window = retry_window
        self.reaper_window = reaper_window
        if command_id is None:
            self._get_id: Callable[[WorkerTask], object] = step_id
        elif isinstance(command_id, str):
            self._get_id = params_key(command_id)
        else:
            self._get_id = command_id

    async def __call__(self, task: WorkerTask) -> Any:
        """Refuse to run under a worker that would settle the task itself."""
        msg = (
            f"guarded Orch8 handler {self.consumer!r} ran outside an InboxWorker: the SDK's"
            " Orch8Worker fails a task whose completion was lost, after its changes"
            " committed; run it with inboxguard.adapters.orch8.InboxWorker"
        )
        raise ConfigurationError(msg)

    async def run(
        self, task: WorkerTask, client: Orch8Client, worker_id: str, heartbeat_interval: float
    ) -> None:
        """Guard, run and settle one task, heartbeating while it runs."""
        beat = asyncio.create_task(_heartbeats(client, task, worker_id, heartbeat_interval))
        try:
            await self._run(task, client, worker_id)
        finally:
            beat.cancel()

    async def _run(self, task: WorkerTask, client: Orch8Client, worker_id: str) -> None:
        """One task through the delivery script, settled by ``_settle``'s verbs."""
        details = _details(task)
        reading = Reading(
            Refused(self.consumer, None, task.id, task.params, self.exclude, details),
            command_id=lambda: self._get_id(task),
            sent_at=lambda: _created_at(task),
            last_attempt=_engine_counts,
            unread=Refused(self.consumer, None, task.id, task.params, (), details),
        )
        output: list[Any] = []

        async def run(request: Run) -> None:
            output.append(
                await self._apply(task, request.command_id, request.sent_at, request.details)
            )

        async def record(request: Record) -> bool:
            return await self._record(request.error, request.refused, request.reason)

        settled = await drive_async(deliver(reading, _RULES), run, record)
        report = Report(client, task, worker_id)
        if settled.error is None:
            faults.reach(faults.FaultPoint.BEFORE_ACK, settled.command_id)
            await report.perform(Step.ACK, output[0])
            return
        await report.perform(_step(settled, settled.error, task), settled.error)

    async def _apply(
        self, task: WorkerTask, cid: str, sent_at: dt.datetime | None, details: Mapping[str, Any]
    ) -> Any:
        """The task's transaction: the guard, the handler if fresh, the commit;
        return the result (the stored one for a duplicate)."""
        if self.sync_session_factory is not None:
            return await asyncio.to_thread(self._apply_sync, task, cid, sent_at, details)
        assert self.session_factory is not None  # guarded() requires one of the two
        async with (
            self.session_factory() as session,
            transaction_async(session, self.inbox, self.consumer, cid),
            self.inbox.guard_async(
                session,
                consumer=self.consumer,
                command_id=cid,
                payload=task.params,
                exclude=self.exclude,
                sent_at=sent_at,
                details=details,
            ) as entry,
        ):
            if not entry.duplicate:
                entry.result = await self.handler(task)
        return entry.result

    def _apply_sync(
        self, task: WorkerTask, cid: str, sent_at: dt.datetime | None, details: Mapping[str, Any]
    ) -> Any:
        assert self.sync_session_factory is not None
        with (
            transaction(self.inbox, self.sync_session_factory, self.consumer, cid) as session,
            self.inbox.guard(
                session,
                consumer=self.consumer,
                command_id=cid,
                payload=task.params,
                exclude=self.exclude,
                sent_at=sent_at,
                details=details,
            ) as entry,
        ):
            if not entry.duplicate:
                entry.result = self.handler(task)
        return entry.result

    async def _record(self, error: Exception, refused: Refused, reason: str | None) -> bool:
        if self.sync_session_factory is not None:
            return await asyncio.to_thread(record_refusal, self.inbox, error, refused, reason)
        assert self.session_factory is not None
        try:
            async with self.session_factory() as session:
                engine = (await session.connection()).engine
        except Exception:
            return False
        return await record_refusal_async(self.inbox, engine, error, refused, reason)


def _step(settled: Settlement, error: Exception, task: WorkerTask) -> Step:
    """The step of the failed task, logged: a retry (the engine creates a new
    task, attempt + 1) or a rejection (failed for good).

    A refusal is failed for good once a quarantine record holds it; one
    without a record is requeued (failed retryably), so the engine keeps
    offering it. A transient error is retried; the handler's own exception
    (the script's ``FAIL``: there is no failure path here) says which itself
    (``retryable``, as the SDK's worker reads it).
    """
    step = settled.step
    if step is Step.FAIL:
        step = Step.RETRY if getattr(error, "retryable", False) else Step.REJECT
    if step is Step.REQUEUE:
        log_requeued(logger, error, f"task {task.id}")
    elif settled.outcome is not None and settled.outcome.refused:
        logger.warning("task %s refused (quarantined): %s; failed for good", task.id, error)
    return step


def _engine_counts(error: Exception) -> bool:
    """Never the last attempt as far as this worker knows: the engine keeps
    the count and the retry schedule (the block's retry policy)."""
    return False


def _as_sent(sent_at: dt.datetime | None) -> dt.datetime | None:
    """The task's creation time as it is: a task without one is guarded
    without a sent time (the engine, not a producer, stamps it)."""
    return sent_at


#: An Orch8 task's rules: its failure goes to the engine's retry policy
#: (``failure_path_retries``), which the handler's ``retryable`` steers.
_RULES = Rules(_as_sent, failure_path_retries=True)


def _details(task: WorkerTask) -> dict[str, Any]:
    return {
        "task_id": task.id,
        "instance_id": task.instance_id,
        "block_id": task.block_id,
        "handler_name": task.handler_name,
        "attempt": task.attempt,
        "params": task.params,
    }


def _created_at(task: WorkerTask) -> dt.datetime | None:
    """When the engine created the task (the age the inbox's horizon is checked
    against); None when the engine sent no usable time."""
    try:
        created = dt.datetime.fromisoformat(task.created_at.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    return created if created.tzinfo is not None else None


async def _heartbeats(client: Orch8Client, task: WorkerTask, worker_id: str, every: float) -> None:
    """Keep the claim alive while the handler runs; stop once the engine says
    another worker holds it."""
    while True:
        await asyncio.sleep(every)
        try:
            await client.heartbeat_task(task.id, worker_id)
        except Orch8Error as error:
            if error.status in STALE_STATUSES:
                logger.warning(
                    "task %s (%s): lease lost (heartbeat answered %d); the run goes on and"
                    " its commit decides, under the inbox's claim, which run applies it",
                    task.id,
                    step_id(task),
                    error.status,
                )
                return
            logger.warning("task %s: heartbeat failed: %s", task.id, error)
        except Exception as error:
            logger.warning("task %s: heartbeat failed: %r", task.id, error)
