"""The asyncio driver of :mod:`._flow`, for ``redis.asyncio`` pipelines: the
sync driver's (:mod:`._drive`) requests, awaited. Records, evidence reads and
lease releases go through a client on the pipeline's own connection pool."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from typing import Any

from inboxguard._core.context import entry_var, session_var
from inboxguard._telemetry import Telemetry
from inboxguard.inbox._drive import handler_span
from inboxguard.inbox._flow import resume, unexpected
from inboxguard.inbox._quarantine import log_write_failure
from inboxguard.inbox._records import InboxEntry
from inboxguard.inbox.redis._drive import (
    check_pipeline,
    commit_span,
    first_queued,
    is_watch_error,
    keys_of,
    quarantine_args,
    queued_commands,
    still_ours,
)
from inboxguard.inbox.redis._keys import KeySpace
from inboxguard.inbox.redis._requests import (
    BlockExit,
    ClaimLease,
    Commit,
    Connect,
    HandOver,
    Inspect,
    Multi,
    Pause,
    RedisFlow,
    Release,
    Request,
    SlotTable,
    WriteQuarantine,
    found_from_hash,
    found_from_reply,
)
from inboxguard.inbox.redis._scripts import CLAIM, QUARANTINE, RELEASE, run_script_async
from inboxguard.inbox.redis._watch_claim import watch_and_run_async

__all__ = ["drive_async"]


class _Async:
    def __init__(self, pipe: Any, keys: KeySpace, telemetry: Telemetry) -> None:
        self.pipe, self.keys = pipe, keys
        self.telemetry = telemetry
        self.entry: InboxEntry | None = None
        self.watching = self.checked = False
        self.mark: object = None  # the first command of the guard's claim
        self.ours = 0  # how many commands of the queue are the guard's
        self._client: Any = None

    @property
    def client(self) -> Any:
        """A redis.asyncio client on the pipeline's own connection pool."""
        if self._client is None:
            from redis.asyncio import Redis  # noqa: PLC0415 - redis is optional

            self._client = Redis(connection_pool=self.pipe.connection_pool)
        return self._client

    async def perform(self, request: Request) -> Any:  # noqa: PLR0911, PLR0912 - one case per request
        pipe = self.pipe
        match request:
            case Connect():
                check_pipeline(pipe, asynchronous=True)
                self.checked = True
                return None
            case Multi(claim):
                pipe.multi()
                for command in claim:
                    pipe.execute_command(*command)
                self.mark = first_queued(pipe) if claim else None
                self.ours = len(claim)
                return None
            case ClaimLease(keys, token, lease_ms):
                script_keys, args = [keys.evidence, keys.lease], [token, lease_ms]
                if self.watching:
                    reply = await run_script_async(pipe, CLAIM, script_keys, args)
                else:  # WATCH and the script in one write
                    reply = await watch_and_run_async(pipe, keys.evidence, CLAIM, script_keys, args)
                    self.watching = True
                return found_from_reply(reply)
            case Pause(seconds):
                await asyncio.sleep(seconds)
                return None
            case SlotTable(commands):
                return [await self._command_keys(command) for command in commands]
            case Commit(extra):
                for command in extra:
                    pipe.execute_command(*command)
                with commit_span(self.telemetry, self.entry):
                    try:
                        await pipe.execute()
                    except Exception as error:
                        if is_watch_error(error):
                            return False
                        raise
                return True
            case Inspect(keys):
                stored = await self.client.hgetall(keys.evidence)
                return found_from_hash(stored)
            case Release(keys, token):
                await run_script_async(self.client, RELEASE, [keys.lease], [token])
                return None
            case WriteQuarantine(_, values):
                try:
                    script_keys, args = quarantine_args(self.keys, values)
                    await run_script_async(self.client, QUARANTINE, script_keys, args)
                except Exception:
                    log_write_failure(values)
                    return False
                return True
            case _:
                return unexpected(request)

    async def _command_keys(self, command: tuple[Any, ...]) -> list[Any]:
        try:
            return keys_of(await self.client.command_getkeys(*command))
        except Exception as error:
            if "no key arguments" in str(error).lower():
                return []
            raise

    async def step(self, flow: RedisFlow, request: Request) -> Request | None:
        try:
            reply = await self.perform(request)
        except Exception as error:
            return resume(flow, error=error)
        return resume(flow, reply)

    async def finish(self, flow: RedisFlow, request: Request | None) -> None:
        while request is not None:
            if isinstance(request, HandOver):
                unexpected(request)
            request = await self.step(flow, request)


@asynccontextmanager
async def drive_async(
    flow: RedisFlow, pipe: Any, keys: KeySpace, telemetry: Telemetry
) -> AsyncIterator[InboxEntry]:
    """Run a Redis guard flow on the caller's redis.asyncio pipeline; records go
    through a client on the pipeline's own connection pool; spans as :func:`drive_sync`."""
    driver = _Async(pipe, keys, telemetry)
    with closing(flow):
        try:
            request = resume(flow)
            while request is not None:
                if not isinstance(request, HandOver):
                    request = await driver.step(flow, request)
                    continue
                mark, ours = driver.mark, driver.ours
                token = session_var.set(pipe)
                driver.entry = request.entry
                entry_var.set(request.entry)  # kept after the block: see current_entry()
                try:
                    with handler_span(telemetry, request.entry):
                        yield request.entry
                except Exception as error:
                    end = BlockExit(still_ours(pipe, mark), error)
                    await pipe.reset()
                    await driver.finish(flow, resume(flow, end))
                    raise
                finally:
                    session_var.reset(token)
                kept = still_ours(pipe, mark)
                end = BlockExit(kept, queued=queued_commands(pipe, ours) if kept else ())
                request = resume(flow, end)
        finally:
            if driver.checked:
                await pipe.reset()
