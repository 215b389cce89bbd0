"""The sync driver of :mod:`._flow` (``redis.Redis`` pipelines), and what the
asyncio one (:mod:`._drive_async`) shares with it.

Each only performs the flow's requests on the caller's pipeline (``WATCH``,
the claim script, ``MULTI``, the queued claim, ``EXEC``) or, for what must
not ride in the caller's transaction (quarantine records, re-reading the
evidence, giving a lease back), on a client of the same server. An error
raised while performing a request is thrown back into the flow, which
decides what it means. The pipeline is reset when the guard ends, whatever
happened (redis-py resets it after ``EXEC`` too).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, closing, contextmanager, nullcontext
from typing import Any

from inboxguard._core.context import entry_var, session_var
from inboxguard._telemetry import OUTCOME, Telemetry
from inboxguard.errors import ConfigurationError
from inboxguard.inbox._drive import handler_span
from inboxguard.inbox._flow import resume, unexpected
from inboxguard.inbox._quarantine import log_write_failure
from inboxguard.inbox._records import InboxEntry
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
from inboxguard.inbox.redis._scripts import CLAIM, QUARANTINE, RELEASE, no_script, run_script
from inboxguard.inbox.redis._watch_claim import watch_and_run

__all__ = [
    "check_pipeline",
    "commit_span",
    "drive_sync",
    "first_queued",
    "in_multi",
    "is_watch_error",
    "keys_of",
    "no_script",
    "quarantine_args",
    "queue_of",
    "queued_commands",
    "run_script",
    "still_ours",
    "write_quarantine",
]

_SYNC_ONLY = (
    "guard() needs a transactional redis-py pipeline: `with client.pipeline() as pipe:"
    " with inbox.guard(pipe, ...)`, got {type}; for a redis.asyncio pipeline use guard_async()"
)
_ASYNC_ONLY = (
    "guard_async() needs a redis.asyncio pipeline: `async with client.pipeline() as pipe:"
    " async with inbox.guard_async(pipe, ...)`, got {type}; for a sync pipeline use guard()"
)


def check_pipeline(pipe: object, *, asynchronous: bool) -> None:
    """Refuse anything but a fresh redis-py pipeline of the right kind.

    Raises:
        ConfigurationError: not a pipeline (a client, a connection), the wrong
            kind (sync or asyncio), already in ``MULTI``, or with commands
            already queued (they would commit without the guard's claim).
    """
    wrong = _ASYNC_ONLY if asynchronous else _SYNC_ONLY
    needed = ("watch", "multi", "execute", "execute_command", "command_stack", "reset")
    if not all(hasattr(pipe, name) for name in needed):
        raise ConfigurationError(wrong.format(type=type(pipe).__name__))
    if inspect.iscoroutinefunction(pipe.execute) is not asynchronous:  # type: ignore[attr-defined]
        raise ConfigurationError(wrong.format(type=type(pipe).__name__))
    if in_multi(pipe) or queue_of(pipe):
        msg = (
            "the pipeline passed to the guard already has commands queued or is in MULTI:"
            " they would commit without the inbox's claim. Pass a fresh pipeline and queue"
            " the writes inside the guarded block"
        )
        raise ConfigurationError(msg)


def quarantine_args(keys: KeySpace, values: dict[str, Any]) -> tuple[list[str], list[Any]]:
    """The keys and arguments of the quarantine script for ``values``."""
    identity = keys.quarantine_identity_key(
        values["consumer"], values["command_id"], values["reason"], values["incoming_digest"]
    )
    args = [
        keys.quarantine_record,
        values["consumer"],
        values["command_id"],
        values["reason"],
        values["incoming_digest"],
        values["stored_digest"] or "",
        values["last_seen_at"].isoformat(),
        values["details"] or "",
    ]
    return [keys.quarantine_seq, keys.quarantine_index, identity], args


def write_quarantine(client: Any, keys: KeySpace, values: dict[str, Any]) -> bool:
    """Write a quarantine record through ``client``; False (logged at ERROR) on failure."""
    try:
        script_keys, args = quarantine_args(keys, values)
        run_script(client, QUARANTINE, script_keys, args)
    except Exception:
        log_write_failure(values)
        return False
    return True


def is_watch_error(error: BaseException) -> bool:
    from redis.exceptions import WatchError  # noqa: PLC0415 - redis is optional

    return isinstance(error, WatchError)


def still_ours(pipe: Any, mark: object) -> bool:
    """The pipeline is still in the guard's MULTI, with its claim queued first."""
    if not in_multi(pipe):
        return False
    queue = queue_of(pipe)
    return mark is None or (bool(queue) and queue[0] is mark)


def queued_commands(pipe: Any, ours: int) -> tuple[tuple[Any, ...], ...]:
    """The arguments of the commands queued after the guard's own ``ours``."""
    return tuple(tuple(_args_of(entry)) for entry in queue_of(pipe)[ours:])


def first_queued(pipe: Any) -> object:
    """The first queued command (the guard's mark that the queue is still its own)."""
    return queue_of(pipe)[0]


def queue_of(pipe: Any) -> list[Any]:
    """The pipeline's queued commands: ``command_stack`` on a redis-py pipeline,
    its transaction strategy's ``command_queue`` on a ``ClusterPipeline``."""
    strategy = getattr(pipe, "_execution_strategy", None)
    if strategy is not None and hasattr(strategy, "command_queue"):
        return list(strategy.command_queue)
    return list(pipe.command_stack)


def in_multi(pipe: Any) -> bool:
    """Whether ``multi()`` was called on the pipeline (commands are being queued)."""
    strategy = getattr(pipe, "_execution_strategy", None)
    if strategy is not None and hasattr(strategy, "_explicit_transaction"):
        return bool(strategy._explicit_transaction)  # noqa: SLF001 - no public flag
    return bool(getattr(pipe, "explicit_transaction", False))


def _args_of(entry: Any) -> Any:
    return entry.args if hasattr(entry, "args") else entry[0]


def keys_of(reply: Any) -> list[Any]:
    return list(reply) if isinstance(reply, list | tuple) else []


def commit_span(telemetry: Telemetry, entry: InboxEntry | None) -> AbstractContextManager[None]:
    """The ``inboxguard.commit`` span around ``EXEC`` (the guard sends it, so
    the guard traces it; the adapters trace only SQL commits)."""
    if entry is None or not telemetry.enabled:
        return nullcontext()
    outcome = "duplicate" if entry.duplicate else "fresh"
    return telemetry.span(
        "inboxguard.commit", entry.consumer, entry.command_id, **{OUTCOME: outcome}
    )


# -- sync ------------------------------------------------------------------------------


class _Sync:
    def __init__(self, pipe: Any, client: Any, keys: KeySpace, telemetry: Telemetry) -> None:
        self.pipe, self.client, self.keys = pipe, client, keys
        self.telemetry = telemetry
        self.entry: InboxEntry | None = None
        self.watching = self.checked = False
        self.mark: object = None  # the first command of the guard's claim
        self.ours = 0  # how many commands of the queue are the guard's

    def perform(self, request: Request) -> Any:  # noqa: PLR0911, PLR0912 - one case per request
        pipe = self.pipe
        match request:
            case Connect():
                check_pipeline(pipe, asynchronous=False)
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
                    reply = run_script(pipe, CLAIM, script_keys, args)
                else:  # WATCH and the script in one write
                    reply = watch_and_run(pipe, keys.evidence, CLAIM, script_keys, args)
                    self.watching = True
                return found_from_reply(reply)
            case Pause(seconds):
                time.sleep(seconds)
                return None
            case SlotTable(commands):
                return [self._command_keys(command) for command in commands]
            case Commit(extra):
                for command in extra:
                    pipe.execute_command(*command)
                with commit_span(self.telemetry, self.entry):
                    try:
                        pipe.execute()
                    except Exception as error:
                        if is_watch_error(error):
                            return False
                        raise
                return True
            case Inspect(keys):
                return found_from_hash(self.client.hgetall(keys.evidence))
            case Release(keys, token):
                run_script(self.client, RELEASE, [keys.lease], [token])
                return None
            case WriteQuarantine(_, values):
                return write_quarantine(self.client, self.keys, values)
            case _:
                return unexpected(request)

    def _command_keys(self, command: tuple[Any, ...]) -> list[Any]:
        try:
            return keys_of(self.client.command_getkeys(*command))
        except Exception as error:
            if "no key arguments" in str(error).lower():
                return []
            raise

    def step(self, flow: RedisFlow, request: Request) -> Request | None:
        try:
            reply = self.perform(request)
        except Exception as error:
            return resume(flow, error=error)
        return resume(flow, reply)

    def finish(self, flow: RedisFlow, request: Request | None) -> None:
        while request is not None:
            if isinstance(request, HandOver):
                unexpected(request)
            request = self.step(flow, request)


@contextmanager
def drive_sync(
    flow: RedisFlow, pipe: Any, client: Any, keys: KeySpace, telemetry: Telemetry
) -> Iterator[InboxEntry]:
    """Run a Redis guard flow on the caller's sync pipeline; records go through
    ``client``; the block runs in the ``inboxguard.handler`` span, ``EXEC`` in
    ``inboxguard.commit``."""
    driver = _Sync(pipe, client, keys, telemetry)
    with closing(flow):
        try:
            request = resume(flow)
            while request is not None:
                if not isinstance(request, HandOver):
                    request = driver.step(flow, request)
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
                    pipe.reset()
                    driver.finish(flow, resume(flow, end))
                    raise
                finally:
                    session_var.reset(token)
                kept = still_ours(pipe, mark)
                end = BlockExit(kept, queued=queued_commands(pipe, ours) if kept else ())
                request = resume(flow, end)
        finally:
            if driver.checked:  # never touch an object that is not a fresh pipeline
                pipe.reset()
