"""One guarded Orch8 task: its command ID, its transaction, and how it is settled.

The task is completed or failed here, with the SDK's client, and never by the
SDK's worker loop: that loop turns a failed completion into a ``fail``, which
would fail a step whose changes already committed. A completion the engine
refuses as stale (404 on v0.7.1, 409 on the engine's main) means another
worker holds the task now; it is logged and nothing else is sent: that
worker's run is a duplicate and completes with the stored result.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from orch8 import Orch8Client, Orch8Error, WorkerTask

from inboxguard import Inbox
from inboxguard._core import faults
from inboxguard.adapters._evidence import (
    Refused,
    command_id_of,
    record_refusal,
    record_refusal_async,
)
from inboxguard.adapters._outcome import log_requeued, outcome_of
from inboxguard.adapters._stores import transaction
from inboxguard.adapters._transaction import transaction_async
from inboxguard.errors import ConfigurationError, InvalidCommandError

__all__ = ["STALE_STATUSES", "GuardedTask", "IdSpec", "step_id"]

logger = logging.getLogger("inboxguard.orch8")

#: How the engine answers a worker that no longer holds the task: 404 on
#: v0.7.1, 409 (``conflict: worker task lease changed``) with claim epochs.
STALE_STATUSES = frozenset({404, 409})

#: None (the step identity), a key of ``params``, or a callable over the task.
IdSpec = str | Callable[[WorkerTask], object] | None


def step_id(task: WorkerTask) -> str:
    """The step's identity across re-offers and retries: ``instance_id/block_id``."""
    return f"{task.instance_id}/{task.block_id}"


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
        details = _details(task)
        refused = Refused(self.consumer, None, task.id, task.params, (), details)
        try:
            cid = command_id_of(self._get_id, task)
            refused = Refused(self.consumer, cid, task.id, task.params, self.exclude, details)
            output = await self._apply(task, cid, details)
        except Exception as error:
            retryable = await self._judge(error, refused)
            await _report(
                client.fail_task(
                    task.id, worker_id, str(error) or repr(error), retryable=retryable
                ),
                "fail",
                task,
            )
            return
        faults.reach(faults.FaultPoint.BEFORE_ACK, cid)
        await _report(client.complete_task(task.id, worker_id, output), "complete", task)

    async def _apply(self, task: WorkerTask, cid: str, details: Mapping[str, Any]) -> Any:
        """The task's transaction: the guard, the handler if fresh, the commit;
        return the result (the stored one for a duplicate)."""
        if self.sync_session_factory is not None:
            return await asyncio.to_thread(self._apply_sync, task, cid, details)
        assert self.session_factory is not None  # guarded() requires one of the two
        sent_at = _created_at(task)
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

    def _apply_sync(self, task: WorkerTask, cid: str, details: Mapping[str, Any]) -> Any:
        assert self.sync_session_factory is not None
        with (
            transaction(self.inbox, self.sync_session_factory, self.consumer, cid) as session,
            self.inbox.guard(
                session,
                consumer=self.consumer,
                command_id=cid,
                payload=task.params,
                exclude=self.exclude,
                sent_at=_created_at(task),
                details=details,
            ) as entry,
        ):
            if not entry.duplicate:
                entry.result = self.handler(task)
        return entry.result

    async def _judge(self, error: Exception, refused: Refused) -> bool:
        """Whether the engine may retry the failed task (a new task, attempt + 1).

        A refusal is failed for good once a quarantine record holds it; one
        without a record is failed retryably, so the engine keeps offering it.
        A transient error is retryable; the handler's own exception says so
        itself (``retryable``, as the SDK's worker reads it).
        """
        outcome = outcome_of(error, failure_path_retries=True)
        if outcome.needs_record:
            outcome = outcome.recorded(await self._record(error, refused))
        if outcome.requeued:
            log_requeued(logger, error, f"task {refused.message_id}")
            return True
        if outcome.refused:
            logger.warning(
                "task %s refused (quarantined): %s; failed for good", refused.message_id, error
            )
            return False
        if outcome.retried:
            return True
        return bool(getattr(error, "retryable", False))

    async def _record(self, error: Exception, refused: Refused) -> bool:
        if self.sync_session_factory is not None:
            return await asyncio.to_thread(record_refusal, self.inbox, error, refused)
        assert self.session_factory is not None
        try:
            async with self.session_factory() as session:
                engine = (await session.connection()).engine
        except Exception:
            return False
        return await record_refusal_async(self.inbox, engine, error, refused)


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


async def _report(call: Awaitable[None], what: str, task: WorkerTask) -> None:
    """Send a completion or a failure; never turn its own failure into another call."""
    try:
        await call
    except Orch8Error as error:
        if error.status in STALE_STATUSES:
            logger.warning(
                "task %s (%s): the engine refused the %s with %d: this worker no longer"
                " holds the task (its lease lapsed and it was offered again); the worker"
                " that holds it now gets the stored result from the inbox",
                task.id,
                step_id(task),
                what,
                error.status,
            )
            return
        logger.error("task %s: the %s was not accepted: %s", task.id, what, error)
    except Exception as error:
        logger.error(
            "task %s: the %s was lost (%r); the engine offers the task again once its"
            " lease lapses, and the inbox turns that run into a duplicate",
            task.id,
            what,
            error,
        )


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
