"""The polling worker that runs guarded Orch8 tasks, and its start-up checks."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from orch8 import Orch8Worker, WorkerTask

from inboxguard._core.retention import CheckedWindow
from inboxguard.adapters._startup_checks import log_alignment_passed, require_tables
from inboxguard.adapters.orch8._guarantee import windows_of
from inboxguard.adapters.orch8._task import GuardedTask
from inboxguard.errors import ConfigurationError, InboxGuardError

__all__ = ["InboxWorker"]

logger = logging.getLogger("inboxguard.orch8")


class InboxWorker(Orch8Worker):
    """``orch8.Orch8Worker`` whose guarded handlers settle their own tasks.

    Same arguments and polling loop as the SDK's worker. A handler made by
    :func:`~inboxguard.adapters.orch8.guarded` is run under its inbox guard
    and completes or fails its task itself (a lost or stale completion is
    logged, never turned into a ``fail``); any other handler runs as the SDK
    runs it. ``on_task_complete`` and ``on_task_fail`` are called for the
    other handlers only.

    :meth:`start` runs :meth:`check` first and refuses to poll when it fails.
    """

    def guarded_tasks(self) -> dict[str, GuardedTask]:
        """The guarded handlers, by handler name."""
        return {n: h for n, h in self.handlers.items() if isinstance(h, GuardedTask)}

    def check(self) -> None:
        """The start-up checks: every guarded handler's inbox has its tables,
        its declared retry and reaper windows fit inside the inbox's evidence
        horizon, and heartbeats come more often than the reaper's timeout.

        Raises:
            ConfigurationError: a missing table, or ``heartbeat_interval`` not
                shorter than a handler's ``reaper_window``.
            RetentionMisalignedError: a window is longer than the horizon.
        """
        guarded = self.guarded_tasks()
        checked: list[CheckedWindow] = []
        for name, task in guarded.items():
            require_tables(task.inbox)
            if self.heartbeat_interval >= task.reaper_window.total_seconds():
                msg = (
                    f"heartbeat_interval={self.heartbeat_interval}s is not shorter than the"
                    f" reaper_window of guarded handler {name!r}"
                    f" ({task.reaper_window.total_seconds()}s): the engine would offer every"
                    " running task to another worker; lower heartbeat_interval"
                )
                raise ConfigurationError(msg)
            horizon = task.inbox.retention.horizon
            for window in windows_of(name, task.retry_window, task.reaper_window):
                task.inbox.require_alignment(window.source, **{window.name: window.bound})
                checked.append(CheckedWindow(window, horizon))
        log_alignment_passed("Orch8", len(guarded), checked)

    async def start(self) -> None:
        """Run :meth:`check`, then poll until :meth:`stop` is called.

        Raises:
            ConfigurationError: a start-up check failed; nothing was polled.
        """
        try:
            await asyncio.to_thread(self.check)
        except InboxGuardError as error:
            logger.critical("refusing to start the Orch8 worker %s: %s", self.worker_id, error)
            raise
        await super().start()

    async def _execute(self, task: WorkerTask) -> None:
        handler: Any = self.handlers.get(task.handler_name)
        if not isinstance(handler, GuardedTask):
            await super()._execute(task)
            return
        try:
            await handler.run(task, self.client, self.worker_id, self.heartbeat_interval)
        finally:
            # The SDK's own _execute keeps this bookkeeping in its finally.
            self._in_flight -= 1
            self._semaphore.release()
