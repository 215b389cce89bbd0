"""A FastStream Kafka batch subscriber (``batch=True``) under the guard.

The whole batch is claimed with :meth:`inboxguard.Inbox.guard_batch_async`
(or :meth:`~inboxguard.Inbox.guard_batch` with a sync session factory) in
one transaction, the handler runs once inside it and applies
:func:`current_batch`'s fresh entries, and the batch's offsets are committed
(``ack()``) only after that transaction commits. Refused records (a mismatch,
a stale or unusable record) are quarantined one by one and produced to the
dead-letter topic. A batch that fails is tried again in place,
``retry_delay`` later; after ``max_attempts`` each of its records is
quarantined as ``retries_exhausted`` and dead-lettered. Whatever no
quarantine record holds is never committed: the batch is sought back
(``nack()``) and read again.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from faststream.exceptions import HandlerException, SkipMessage

from inboxguard import BatchCommand, InboxBatch, QuarantineReason
from inboxguard._core import headers as _headers
from inboxguard.adapters._delivery import Delivery as _Message
from inboxguard.adapters._delivery import parse_sent_at
from inboxguard.adapters._evidence import Refused, command_id_of
from inboxguard.adapters.faststream._brokers import record_time
from inboxguard.adapters.faststream._guard import Guard
from inboxguard.adapters.faststream._kafka import KafkaKind
from inboxguard.adapters.faststream._options import HandlerOptions
from inboxguard.errors import ConfigurationError

__all__ = ["KafkaBatch", "current_batch", "is_batch"]

_batch: contextvars.ContextVar[InboxBatch] = contextvars.ContextVar("inboxguard_kafka_batch")


def current_batch() -> InboxBatch:
    """The :class:`inboxguard.InboxBatch` of the Kafka batch being handled:
    apply ``current_batch().fresh`` (``entry.payload``; assign ``entry.result``)
    and skip the rest, which are duplicates or refused.

    Raises:
        ConfigurationError: called outside a guarded Kafka batch handler.
    """
    try:
        return _batch.get()
    except LookupError:
        msg = (
            "current_batch() was called outside a Kafka batch subscriber guarded by"
            " InboxMiddleware (@broker.subscriber(..., batch=True))"
        )
        raise ConfigurationError(msg) from None


def is_batch(msg: Any) -> bool:
    """True for the message of a Kafka batch subscriber (a sequence of records)."""
    return isinstance(getattr(msg, "raw_message", None), tuple | list)


@dataclass(frozen=True, slots=True)
class _Item:
    record: Any
    command: BatchCommand
    refused: Refused


class KafkaBatch:
    """One polled batch through the guard."""

    def __init__(self, guard: Guard, kind: KafkaKind, msg: Any, options: HandlerOptions) -> None:
        self.guard = guard
        self.kind = kind
        self.msg = msg
        self.options = options

    async def run(self, call_next: Any) -> Any:
        """Claim, run, commit, dead-letter the refused, then commit the offsets."""
        guard, msg = self.guard, self.msg
        records: Sequence[Any] = msg.raw_message
        bodies = await msg.decode()
        items, dead = [], []
        for index, record in enumerate(records):
            item = self.read(index, record, bodies)
            if isinstance(item, _Item):
                items.append(item)
                continue
            error, refused = item
            if not await guard.record(error, refused, None):
                await self.back()
            dead.append(record)
        result = None
        policy = guard.policy
        for number in range(1, policy.max_attempts + 1):
            try:
                result, refused_records = await self.apply(call_next, items)
            except HandlerException:
                raise
            except Exception as error:
                guard.policy.logger.warning(
                    "attempt %d/%d of a Kafka batch of %d records failed (%r)",
                    number,
                    policy.max_attempts,
                    len(items),
                    error,
                )
                if number == policy.max_attempts:
                    await self.give_up(items, error)
                    dead.extend(i.record for i in items)
                else:
                    await asyncio.sleep(policy.delay)
                continue
            dead.extend(refused_records)
            break
        try:
            for record in dead:
                await self.kind.dead_letter_record(record)
        except Exception:
            guard.policy.logger.exception("could not dead-letter a Kafka record; seeking back")
            await self.back()
        await msg.ack()
        return result

    def read(self, index: int, record: Any, bodies: Any) -> _Item | tuple[Exception, Refused]:
        """One record as a batch command, or why it cannot be one."""
        options, msg = self.options, self.msg
        all_headers = list(getattr(msg, "batch_headers", None) or ())
        headers = dict(all_headers[index]) if index < len(all_headers) else {}
        position = f"{record.topic}/{record.partition}@{record.offset}"
        raw = {"body": _text(record.value), "headers": headers}
        refused = Refused(options.consumer, None, position, raw, (), raw)
        try:
            body = bodies[index]
            details = {
                "body": body,
                "headers": headers,
                "properties": {
                    "topic": record.topic,
                    "partition": record.partition,
                    "offset": record.offset,
                },
                "broker": "kafka",
            }
            cid = command_id_of(options.get_id, _Message(body, headers, details["properties"]))
            refused = Refused(options.consumer, cid, position, body, options.exclude, details)
            sent_raw = _headers.sent_at_of(headers)
            sent = parse_sent_at(sent_raw) if sent_raw is not None else record_time(record)
            sent_at = self.guard.sent_check(options.consumer)(sent)
        except Exception as bad:
            return bad, refused
        return _Item(record, BatchCommand(cid, body, sent_at, details), refused)

    async def apply(self, call_next: Any, items: Sequence[_Item]) -> tuple[Any, list[Any]]:
        """The transaction: claim the batch, run the handler, store the results."""
        if not items:
            return None, []
        guard, options = self.guard, self.options
        consumer, commands, exclude = options.consumer, [i.command for i in items], options.exclude
        result = None
        if guard.async_session_factory is not None:
            async with guard.async_session_factory() as session, session.begin():
                async with guard.inbox.guard_batch_async(
                    session, consumer=consumer, commands=commands, exclude=exclude
                ) as batch:
                    with _bound(batch):
                        if batch.fresh:
                            result = await call_next(self.msg)
        else:
            assert guard.session_factory is not None  # one of the two, checked at construction
            with guard.session_factory() as sync_session, sync_session.begin():
                with guard.inbox.guard_batch(
                    sync_session, consumer=consumer, commands=commands, exclude=exclude
                ) as batch:
                    with _bound(batch):
                        if batch.fresh:
                            result = await call_next(self.msg)
        return result, [items[e.index].record for e in batch.refused]

    async def give_up(self, items: Sequence[_Item], error: Exception) -> None:
        """Quarantine each record of a batch out of attempts."""
        for item in items:
            reason = QuarantineReason.RETRIES_EXHAUSTED
            if not await self.guard.record(error, item.refused, reason):
                await self.back()

    async def back(self) -> None:
        """Seek the batch back (read again) and leave it unsettled."""
        await self.msg.nack()
        raise SkipMessage


@contextmanager
def _bound(batch: InboxBatch) -> Iterator[None]:
    token = _batch.set(batch)
    try:
        yield
    finally:
        _batch.reset(token)


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return "" if value is None else str(value)
