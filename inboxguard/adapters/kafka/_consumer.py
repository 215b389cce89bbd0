"""A guarded aiokafka consumer: each record, or each polled batch, in one
database transaction, and its offset committed only after that transaction.

See :class:`GuardedConsumer`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from sqlalchemy.ext.asyncio import AsyncSession

from inboxguard import BatchCommand, Inbox, InboxBatch
from inboxguard._core import faults
from inboxguard._core.retention import Window
from inboxguard.adapters._consumers import claim_consumer
from inboxguard.adapters._delivery import DEFAULT_MAX_ATTEMPTS, DEFAULT_RETRY_DELAY
from inboxguard.adapters._kafka_startup import (
    check_consumer,
    reset_of,
    reset_windows,
    retry_window,
    topic_retentions,
)
from inboxguard.adapters._redelivery import Redelivery, Step
from inboxguard.adapters._startup_checks import require_tables
from inboxguard.adapters._transaction import transaction_async
from inboxguard.adapters.kafka._attempt import Prepared, Reader
from inboxguard.adapters.kafka._guarantee import register
from inboxguard.adapters.kafka._record import RecordId, position_of
from inboxguard.adapters.kafka._settle import Settler
from inboxguard.adapters.kafka._watermarks import Watermarks, below
from inboxguard.errors import ConfigurationError

if TYPE_CHECKING:
    from inboxguard.adapters.kafka.confluent import ConfluentConsumer

__all__ = ["BatchHandler", "GuardedConsumer", "Handler"]

logger = logging.getLogger("inboxguard.kafka")

#: ``await handler(body, record)``: apply one fresh command; its return value is stored.
Handler = Callable[[Any, Any], Awaitable[Any]]
#: ``await handler(batch, records)``: apply ``batch.fresh`` (``records[i]`` is
#: the record of ``batch[i]``); assign ``entry.result`` to store one.
BatchHandler = Callable[[InboxBatch, Sequence[Any]], Awaitable[None]]


class GuardedConsumer:
    """Run each Kafka record's command once, committing offsets after the evidence.

    Wraps an ``aiokafka.AIOKafkaConsumer`` created with a ``group_id`` and
    ``enable_auto_commit=False``, or a librdkafka consumer through
    :class:`inboxguard.adapters.kafka.confluent.ConfluentConsumer` (the same
    decisions, the same guarantees). :meth:`run` guards each record with
    :meth:`inboxguard.Inbox.guard_async`; :meth:`run_batch` guards each
    polled batch with :meth:`inboxguard.Inbox.guard_batch_async`, in one
    transaction. In both, a record's offset is committed only after its
    transaction commits (or once a quarantine record holds it), so a worker
    killed in between leaves the offset behind and the redelivery is a
    duplicate, skipped with its stored result:

    * a duplicate (same command ID and payload) is committed without
      running the handler;
    * a payload mismatch or a record older than the evidence is
      quarantined, produced to ``dead_letter_topic`` when one is named, then
      committed;
    * a claim held elsewhere, a transient database error or a handler
      exception is retried in place ``retry_delay`` later, holding the
      partition, and at ``max_attempts`` quarantined as
      ``retries_exhausted``, dead-lettered and committed. A batch that fails
      ``max_attempts`` times is split into batches of one record each.

    Args:
        consumer: the aiokafka consumer, or a ``ConfluentConsumer`` (not
            started; :meth:`start` subscribes and starts it).
        inbox: the :class:`inboxguard.Inbox` holding the evidence.
        name: the consumer name evidence is filed under (declared).
        topics: the topics to subscribe to.
        session_factory: opens an ``AsyncSession`` per transaction.
        command_id: None (the outbox's ``x-inbox-command-id`` header), a body
            field, or a callable over the ``ConsumerRecord``; never the
            record key by default (a key names an entity, not a command).
        producer: a started ``AIOKafkaProducer`` (or a ``ConfluentProducer``)
            for ``dead_letter_topic``.
        dead_letter_topic: where refused records are produced (with their key,
            value and headers) before their offset is committed; without it
            the quarantine record is the dead letter.
        watermarks: record each partition's offset as a watermark in the same
            transaction, and seek a newly assigned partition past it.
        windows: replay windows of your own, checked at start-up.
        guarantee: what only you know of the consumer's guarantee table (see
            :class:`inboxguard.Guarantee`); ``inboxguard guarantees`` derives
            the rest, the delivery mode from the offset commits.

    Raises:
        ConfigurationError: a setting that cannot keep the guarantees.
    """

    def __init__(  # noqa: PLR0913 - one keyword per setting, as the other adapters
        self,
        consumer: AIOKafkaConsumer | ConfluentConsumer,
        inbox: Inbox,
        *,
        name: str,
        topics: Sequence[str],
        session_factory: Callable[[], AsyncSession],
        command_id: RecordId = None,
        exclude: Iterable[str] = (),
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        retry_delay: dt.timedelta = DEFAULT_RETRY_DELAY,
        decode: Callable[[bytes], Any] = json.loads,
        producer: Any = None,
        dead_letter_topic: str | None = None,
        watermarks: bool = False,
        windows: Mapping[str, dt.timedelta] | None = None,
        require_sent_at: bool = False,
        shared_consumer: bool = False,
        max_records: int = 100,
        guarantee: object = None,
    ) -> None:
        if not isinstance(inbox, Inbox):
            msg = f"GuardedConsumer needs an inboxguard.Inbox, got {type(inbox).__name__}"
            raise ConfigurationError(msg)
        if isinstance(topics, str) or not topics or not all(isinstance(t, str) for t in topics):
            msg = f"topics must be a non-empty list of topic names, got {topics!r}"
            raise ConfigurationError(msg)
        if dead_letter_topic is not None and producer is None:
            msg = (
                f"dead_letter_topic={dead_letter_topic!r} needs producer= (a started"
                " AIOKafkaProducer, or a ConfluentProducer) to produce refused records to it"
            )
            raise ConfigurationError(msg)
        self.consumer = consumer
        self.inbox = inbox
        self.name = name
        self.topics = list(topics)
        self.policy = Redelivery.checked(max_attempts, retry_delay, logger)
        self.reader = Reader(
            inbox,
            name,
            command_id=command_id,
            session_factory=session_factory,
            exclude=exclude,
            policy=self.policy,
            decode=decode,
            require_sent_at=require_sent_at,
        )
        self.settler = Settler(self.reader, producer, dead_letter_topic)
        self.session_factory = session_factory
        self.producer = producer
        self.dead_letter_topic = dead_letter_topic
        self.watermarks = Watermarks(inbox, name, session_factory, consumer) if watermarks else None
        self.windows = dict(windows or {})
        self.shared = shared_consumer
        self.max_records = max_records
        self.command_id = command_id
        #: The topics' retention windows found by :meth:`start`.
        self.replay_windows: list[Window] = []
        self.started = False
        self._stopping = asyncio.Event()
        register(self, guarantee)

    # -- start-up -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Check the settings, subscribe, start the consumer, check the replay windows.

        Raises:
            ConfigurationError: auto-commit on, no ``group_id``, missing tables,
                or a consumer name another handler uses.
            RetentionMisalignedError: the topic's retention (a group resetting to
                ``earliest``), the retry schedule or a declared window outlives
                the evidence.
        """
        where = f"kafka consumer {self.name!r}"
        check_consumer(self.consumer, where)
        claim_consumer(self.inbox, self.name, where, shared=self.shared, option="shared_consumer")
        require_tables(self.inbox)
        retry = retry_window(where, self.policy.max_attempts, self.reader_delay)
        self.inbox.require_alignment(retry.source, **{retry.name: retry.bound})
        if self.windows:
            self.inbox.require_alignment(f"{where}: windows=...", **self.windows)
        retentions = await topic_retentions(self._bootstrap(), self.topics)
        self.replay_windows = reset_windows(where, reset_of(self.consumer), retentions)
        for window in self.replay_windows:
            self.inbox.require_alignment(window.source, **{window.name: window.bound})
        listener = self.watermarks.listener() if self.watermarks else None
        if listener is None:
            self.consumer.subscribe(topics=self.topics)
        else:
            self.consumer.subscribe(topics=self.topics, listener=listener)
        await self.consumer.start()
        self.started = True

    @property
    def reader_delay(self) -> dt.timedelta:
        """The retry delay as a timedelta."""
        return dt.timedelta(seconds=self.policy.delay)

    def _bootstrap(self) -> Any:
        client = getattr(self.consumer, "_client", self.consumer)  # aiokafka's, or the shim
        return getattr(client, "_bootstrap_servers", "localhost")

    def stop(self) -> None:
        """Ask :meth:`run` or :meth:`run_batch` to return after the current poll."""
        self._stopping.set()

    # -- one record at a time -----------------------------------------------------------------

    async def run(self, handler: Handler, *, poll_timeout: float = 0.2) -> None:
        """Guard each record with ``handler`` until :meth:`stop`."""
        while not self._stopping.is_set():
            polled = await self.consumer.getmany(
                timeout_ms=int(poll_timeout * 1000), max_records=self.max_records
            )
            for records in polled.values():
                for record in await self._unseen(records):
                    await self.one(handler, record)

    async def one(self, handler: Handler, record: Any) -> None:
        """Guard one record, dead-letter it if refused, then commit its offset."""

        async def apply(prepared: Prepared, _attempt: int) -> None:
            await self._apply_one(handler, prepared)

        await self.settler.settle(record, apply)
        await self._commit([record])

    async def _apply_one(self, handler: Handler, prepared: Prepared) -> None:
        cid = prepared.command_id
        assert cid is not None  # only usable records are applied
        async with (
            self.session_factory() as session,
            transaction_async(session, self.inbox, self.name, cid),
            self.inbox.guard_async(
                session,
                consumer=self.name,
                command_id=cid,
                payload=prepared.body,
                exclude=self.reader.exclude,
                sent_at=prepared.sent_at,
                details=prepared.details,
            ) as entry,
        ):
            if self.watermarks is not None:
                await self.watermarks.advance(session, [prepared.record])
            if entry.duplicate:
                logger.info(
                    "%s: %s is a duplicate (%s); skipped",
                    self.name,
                    cid,
                    position_of(prepared.record),
                )
            else:
                entry.result = await handler(prepared.body, prepared.record)
        faults.reach(faults.FaultPoint.BEFORE_ACK, cid)

    # -- a polled batch at a time -------------------------------------------------------------

    async def run_batch(self, handler: BatchHandler, *, poll_timeout: float = 0.2) -> None:
        """Guard each polled batch with ``handler`` until :meth:`stop`."""
        while not self._stopping.is_set():
            polled = await self.consumer.getmany(
                timeout_ms=int(poll_timeout * 1000), max_records=self.max_records
            )
            records = await self._unseen([r for rs in polled.values() for r in rs])
            if records:
                await self.batch(handler, records)

    async def batch(self, handler: BatchHandler, records: Sequence[Any]) -> None:
        """Guard ``records`` in one transaction, dead-letter the refused ones,
        then commit their offsets; after ``max_attempts`` failures, one record
        per transaction, in order. No offset is committed before every record
        of the batch is settled, so a commit never passes a record that is not."""
        prepared = [self.reader.prepare(r) for r in records]
        usable = [p for p in prepared if p.error is None]
        for number in range(1, self.policy.max_attempts + 1):
            try:
                unusable = [p.record for p in prepared if p.error is not None]
                refused = await self._apply_batch(handler, usable, unusable)
            except Exception as error:
                logger.warning(
                    "batch attempt %d/%d of %d records failed (%r)",
                    number,
                    self.policy.max_attempts,
                    len(usable),
                    error,
                )
                if number < self.policy.max_attempts:
                    await asyncio.sleep(self.policy.delay)
                continue
            for item, _error in refused:
                await self.settler.perform(Step.REJECT, item.record)
            for bad in (p for p in prepared if p.error is not None):
                await self._settle_alone(handler, bad.record)
            await self._commit(records)
            return
        for record in records:
            await self._settle_alone(handler, record)
        await self._commit(records)

    async def _settle_alone(self, handler: BatchHandler, record: Any) -> None:
        """One record in a transaction of its own, until it is applied or held
        by a quarantine record (and dead-lettered); its offset is left to the
        caller."""

        async def apply(prepared: Prepared, _attempt: int) -> None:
            refused = await self._apply_batch(handler, [prepared])
            if refused:
                raise refused[0][1]

        await self.settler.settle(record, apply)

    async def _apply_batch(
        self, handler: BatchHandler, items: Sequence[Prepared], unsettled: Sequence[Any] = ()
    ) -> list[tuple[Prepared, Exception]]:
        """One transaction for ``items``; return those the inbox refused (each
        quarantined in a transaction of its own), with the reason. The
        watermarks stop below the first refused or ``unsettled`` record of each
        partition: those are settled after the commit, and a successor must
        still read them."""
        if not items:
            return []
        commands = [BatchCommand(p.command_id or "", p.body, p.sent_at, p.details) for p in items]
        async with self.session_factory() as session, session.begin():
            async with self.inbox.guard_batch_async(
                session, consumer=self.name, commands=commands, exclude=self.reader.exclude
            ) as batch:
                if self.watermarks is not None:
                    held = [*unsettled, *(items[e.index].record for e in batch.refused)]
                    await self.watermarks.advance(session, below([p.record for p in items], held))
                for entry in batch.duplicates:
                    logger.info(
                        "%s: %s is a duplicate (%s); skipped",
                        self.name,
                        entry.command_id,
                        position_of(items[entry.index].record),
                    )
                if batch.fresh:
                    await handler(batch, [p.record for p in items])
        for item in items:
            faults.reach(faults.FaultPoint.BEFORE_ACK, item.command_id or "")
        return [(items[e.index], e.error) for e in batch.refused if e.error is not None]

    async def _unseen(self, records: Sequence[Any]) -> Sequence[Any]:
        """``records`` less those their partition's watermark says were applied
        (their offsets are committed)."""
        if self.watermarks is None or not records:
            return records
        kept = await self.watermarks.unseen(records)
        if len(kept) < len(records):
            ids = {id(r) for r in kept}
            await self._commit([r for r in records if id(r) not in ids])
        return kept

    # -- settlement ---------------------------------------------------------------------------

    async def _commit(self, records: Sequence[Any]) -> None:
        """Commit the offset after each partition's last record."""
        offsets: dict[TopicPartition, int] = {}
        for record in records:
            tp = TopicPartition(record.topic, record.partition)
            offsets[tp] = max(offsets.get(tp, 0), record.offset + 1)
        if not offsets:
            return
        try:
            await self.consumer.commit(offsets)
        except KafkaError as error:
            # A rebalance took the partition: its next owner reads the record
            # again, and the inbox answers it as a duplicate.
            logger.warning("offset commit failed (%r); the redelivery is a duplicate", error)
