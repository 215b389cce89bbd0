"""One record through the guard: read it, run its transaction, judge the end.

A Kafka partition is a log, not a queue: a record cannot be put back behind
the others, and publishing a copy would reorder it among its key's records.
So a failed attempt is retried in place, ``retry_delay`` later, holding the
partition (the order of its records is kept), up to ``max_attempts``; a
refusal, or the last failed attempt, is quarantined, sent to the dead-letter
topic when one is named, and only then is its offset committed. The
attempt count lives in the worker: a worker killed mid-retry starts the
count again, so a record may get more attempts than ``max_attempts``, never
fewer.

:class:`Reader` reads a record for the delivery script
(:func:`~inboxguard.adapters._script.deliver`), which decides the rest:
:meth:`Reader.attempt` drives one attempt to the step it settles with
(``_settle`` performs it), :meth:`Reader.prepare` the command a batch
guards (or the refusal of an unusable record).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from inboxguard import Inbox
from inboxguard._core import headers as _headers
from inboxguard.adapters._drive import drive_async
from inboxguard.adapters._evidence import Refused, record_refusal_async
from inboxguard.adapters._redelivery import Attempt, Redelivery
from inboxguard.adapters._script import Reading, Record, Run, Step, deliver
from inboxguard.adapters._sent_time import SentTimeCheck
from inboxguard.adapters.kafka._record import (
    RecordId,
    details_of,
    headers_of,
    id_of,
    position_of,
    sent_time_of,
)

__all__ = ["Prepared", "Reader"]

logger = logging.getLogger("inboxguard.kafka")

_STAMP = (
    "publish it through the outbox (it stamps x-inbox-sent-at), or produce it with a"
    " CreateTime timestamp (the producer's default) or an x-inbox-sent-at header"
)

#: ``apply(prepared, attempt)``: run one attempt's transaction; raise to fail it.
Apply = Callable[["Prepared", int], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A record as the delivery script would guard it: its decoded body, its
    command ID and sent time, what a quarantine record keeps of it
    (``details``); or ``error`` when the script refuses it before the guard."""

    record: Any
    body: Any
    command_id: str | None
    sent_at: dt.datetime | None
    details: Mapping[str, Any]
    error: Exception | None = None


class Reader:
    """How one guarded consumer reads, retries and refuses its records."""

    def __init__(
        self,
        inbox: Inbox,
        name: str,
        *,
        command_id: RecordId,
        session_factory: Callable[[], AsyncSession],
        exclude: Iterable[str],
        policy: Redelivery,
        decode: Callable[[bytes], Any] = json.loads,
        require_sent_at: bool = False,
    ) -> None:
        self.inbox = inbox
        self.name = name
        self.get_id = id_of(command_id)
        self.session_factory = session_factory
        self.exclude = tuple(exclude)
        self.policy = policy
        self.decode = decode
        self.sent_check = SentTimeCheck(
            name, require=require_sent_at, stamp=_STAMP, option="require_sent_at", logger=logger
        )
        self.rules = policy.rules(self.sent_check)

    def reading(self, record: Any, attempt: Attempt) -> Reading:
        """What the delivery script needs of ``record`` on ``attempt``:
        its decoded body and details, and how to read its command ID and sent
        time; the script decides what they make of it."""
        headers = headers_of(record)
        key = position_of(record)
        raw = {"body": _text(record.value), "headers": headers}
        unread = Refused(self.name, None, key, raw, (), raw)
        try:
            body = self.decode(record.value)
            details = details_of(record, body, headers, attempt.number)
        except Exception as bad:
            return Reading(unread, _unread, _unread, attempt.last_attempt, bad)
        return Reading(
            Refused(self.name, None, key, body, self.exclude, details),
            command_id=lambda: self.get_id(record, body, headers),
            sent_at=lambda: sent_time_of(record, headers),
            last_attempt=attempt.last_attempt,
            unread=unread,
        )

    def prepare(self, record: Any, attempt: int = 1) -> Prepared:
        """Read ``record`` for a batch; an unusable one carries its ``error``.

        The delivery script decides, up to the guard: the command it would
        run, or the refusal it would record (never written here: the batch
        settles an unusable record alone, through :meth:`attempt`).
        """
        script = deliver(self.reading(record, self._attempt(attempt)), self.rules)
        try:
            request = next(script)
        finally:
            script.close()
        if isinstance(request, Record):
            return Prepared(record, None, None, None, request.refused.details, request.error)
        return _prepared(record, request)

    async def attempt(self, record: Any, number: int, apply: Apply) -> Step:
        """One attempt of ``record``, by the delivery script: the step it ends
        with, logged."""
        attempt = self._attempt(number)

        async def run(request: Run) -> None:
            await apply(_prepared(record, request), number)

        async def write(request: Record) -> bool:
            return await self.record(request.error, request.refused, request.reason)

        script = deliver(self.reading(record, attempt), self.rules)
        settled = await drive_async(script, run, write)
        if settled.error is not None:
            attempt.report(settled.step, settled.error, settled.name, settled.shown)
        return settled.step

    def _attempt(self, number: int) -> Attempt:
        """Attempt ``number`` of a record (the count lives in this worker)."""
        return self.policy.receive({_headers.ATTEMPT: number}, self.name)

    async def record(self, error: BaseException, refused: Refused, reason: str | None) -> bool:
        """Whether a quarantine record now holds the record (written through the
        session factory's engine, in a transaction of its own)."""
        try:
            async with self.session_factory() as session:
                engine = (await session.connection()).engine
        except Exception:
            return False
        return await record_refusal_async(self.inbox, engine, error, refused, reason)


def _prepared(record: Any, run: Run) -> Prepared:
    """The command the script asked to run for ``record``."""
    return Prepared(record, run.payload, run.command_id, run.sent_at, run.details)


def _unread() -> None:
    """Nothing to read (the script asks for nothing of an undecodable body)."""


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return "" if value is None else str(value)
