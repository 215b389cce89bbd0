"""The quarantine, read and settled for operators: list, show, release, resolve.

Every settling action is recorded durably (who, why, when) in the inbox's
``quarantine_actions`` table, in the transaction that changes the record.
Each function also takes an :class:`~inboxguard.InboxStore` (a
:class:`~inboxguard.RedisInbox`, say) in place of the engine (``table_prefix``
then unused); the store keeps the actions (a Redis inbox in Redis, with no
expiry) as the same :class:`~inboxguard.inbox.QuarantineAction` values.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy.engine import Engine

from inboxguard._core.clock import Clock
from inboxguard.inbox import (
    Inbox,
    InboxStore,
    QuarantineAction,
    QuarantineRecord,
    QuarantineReplay,
)
from inboxguard.operations._records import QuarantineDetail
from inboxguard.operations._redis import quarantine_detail_redis
from inboxguard.operations._tables import present_tables

__all__ = [
    "Target",
    "open_inbox",
    "quarantine_count",
    "quarantine_detail",
    "quarantine_list",
    "quarantine_show",
    "release_quarantine",
    "resolve_quarantine",
    "store_of",
]

#: What the read model reads and settles: a database's engine, or a store.
Target = Engine | InboxStore

#: The read model knows no RetentionPolicy: every evidence row carries its own
#: expiry, so the policy of the Inbox it opens is never consulted.
_UNCONSULTED_RETENTION = dt.timedelta(days=1)


def open_inbox(engine: Engine, table_prefix: str, clock: Clock | None = None) -> Inbox:
    """An :class:`~inboxguard.Inbox` on ``engine`` for reading and settling
    records (its retention is never consulted)."""
    return Inbox(engine, retention=_UNCONSULTED_RETENTION, table_prefix=table_prefix, clock=clock)


def store_of(target: Target, table_prefix: str, clock: Clock | None = None) -> InboxStore:
    """The store a read or a settling runs on: the given one, or an
    :class:`~inboxguard.Inbox` on the given engine."""
    if isinstance(target, Engine):
        return open_inbox(target, table_prefix, clock)
    return target


def quarantine_list(
    engine: Target,
    *,
    table_prefix: str = "inboxguard_",
    consumer: str | None = None,
    status: str | None = "open",
    limit: int | None = 100,
    after: int | None = None,
) -> list[QuarantineRecord]:
    """Quarantine records, oldest first: ``status`` ``"open"`` (default),
    ``"resolved"`` or None for every status; ``consumer`` None for all;
    ``after`` an id: the page of records after it."""
    return store_of(engine, table_prefix).quarantined(
        consumer, status=status, limit=limit, after=after
    )


def quarantine_count(
    engine: Target,
    *,
    table_prefix: str = "inboxguard_",
    consumer: str | None = None,
    status: str | None = "open",
) -> int:
    """How many records :func:`quarantine_list` would list without a limit."""
    return store_of(engine, table_prefix).quarantine_count(consumer, status=status)


def quarantine_show(
    engine: Target, record_id: int, *, table_prefix: str = "inboxguard_"
) -> QuarantineDetail | None:
    """One record with its replays and actions, or None when no record has that id."""
    if not isinstance(engine, Engine):
        found = engine.quarantine_record(record_id)
        return None if found is None else quarantine_detail_redis(engine, found)
    inbox = open_inbox(engine, table_prefix)
    record = inbox.quarantine_record(record_id)
    return None if record is None else quarantine_detail(inbox, record)


def quarantine_detail(inbox: Inbox, record: QuarantineRecord) -> QuarantineDetail:
    """``record`` with its audit trails; a trail whose table a database
    created before it existed has not got is empty."""
    trails = inbox.tables.quarantine_replays, inbox.tables.quarantine_actions
    present = present_tables(inbox.engine, *trails)
    replays = (
        inbox.quarantine_replays(record.id)
        if inbox.tables.quarantine_replays.name in present
        else []
    )
    actions = (
        inbox.quarantine_actions(record.id)
        if inbox.tables.quarantine_actions.name in present
        else []
    )
    return QuarantineDetail(record, tuple(replays), tuple(actions))


def quarantine_details_of(
    inbox: Inbox, records: list[QuarantineRecord], consumer: str, command_id: str
) -> tuple[QuarantineDetail, ...]:
    """The records of one command with their audit trails, read in a bounded
    number of queries (one for the tables present, one per trail), however
    many records the command has; ``records`` are the command's oldest, so
    only the trails up to the last of them are read."""
    trails = inbox.tables.quarantine_replays, inbox.tables.quarantine_actions
    if not records:
        return ()
    present = present_tables(inbox.engine, *trails)
    if all(t.name in present for t in trails):
        replays, actions = inbox.quarantine_trails_of(consumer, command_id, through=records[-1].id)
    else:  # a database from before the trails: read what it has, record by record
        return tuple(quarantine_detail(inbox, r) for r in records)
    by_replay: dict[int, list[QuarantineReplay]] = {}
    by_action: dict[int, list[QuarantineAction]] = {}
    for p in replays:
        by_replay.setdefault(p.quarantine_id, []).append(p)
    for a in actions:
        by_action.setdefault(a.quarantine_id, []).append(a)
    return tuple(
        QuarantineDetail(r, tuple(by_replay.get(r.id, ())), tuple(by_action.get(r.id, ())))
        for r in records
    )


def release_quarantine(
    engine: Target,
    record_id: int,
    *,
    actor: str,
    reason: str,
    table_prefix: str = "inboxguard_",
    clock: Clock | None = None,
) -> QuarantineAction | None:
    """Let a quarantined command be processed again (see
    :meth:`Inbox.release_quarantine`, :meth:`RedisInbox.release_quarantine`);
    None when no open record has that id. A store acts on its own clock.

    Raises:
        ConfigurationError: ``actor`` or ``reason`` is empty, or the
            ``quarantine_actions`` table is missing (the message names the fix).
    """
    inbox = store_of(engine, table_prefix, clock)
    return inbox.release_quarantine(record_id, actor=actor, reason=reason)


def resolve_quarantine(
    engine: Target,
    record_id: int,
    *,
    actor: str,
    reason: str,
    table_prefix: str = "inboxguard_",
    clock: Clock | None = None,
) -> QuarantineAction | None:
    """Mark an open record handled, recording who and why; the evidence is
    untouched, so the command is judged as before. None when no open record
    has that id.

    Raises:
        ConfigurationError: ``actor`` or ``reason`` is empty, or the
            ``quarantine_actions`` table is missing.
    """
    inbox = store_of(engine, table_prefix, clock)
    if not inbox.resolve_quarantine(record_id, actor=actor, reason=reason):
        return None
    return inbox.quarantine_actions(record_id)[-1]
