"""The quarantine, read and settled for operators: list, show, release, resolve.

Every settling action is recorded durably (who, why, when) in the inbox's
``quarantine_actions`` table, in the transaction that changes the record.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import inspect
from sqlalchemy.engine import Engine

from inboxguard._core.clock import Clock
from inboxguard.inbox import Inbox, QuarantineAction, QuarantineRecord
from inboxguard.operations._records import QuarantineDetail

__all__ = [
    "open_inbox",
    "quarantine_detail",
    "quarantine_list",
    "quarantine_show",
    "release_quarantine",
    "resolve_quarantine",
]

#: The read model knows no RetentionPolicy: every evidence row carries its own
#: expiry, so the policy of the Inbox it opens is never consulted.
_UNCONSULTED_RETENTION = dt.timedelta(days=1)


def open_inbox(engine: Engine, table_prefix: str, clock: Clock | None = None) -> Inbox:
    """An :class:`~inboxguard.Inbox` on ``engine`` for reading and settling
    records (its retention is never consulted)."""
    return Inbox(engine, retention=_UNCONSULTED_RETENTION, table_prefix=table_prefix, clock=clock)


def quarantine_list(
    engine: Engine,
    *,
    table_prefix: str = "inboxguard_",
    consumer: str | None = None,
    status: str | None = "open",
    limit: int | None = 100,
) -> list[QuarantineRecord]:
    """Quarantine records, oldest first: ``status`` ``"open"`` (default),
    ``"resolved"`` or None for every status; ``consumer`` None for all."""
    return open_inbox(engine, table_prefix).quarantined(consumer, status=status, limit=limit)


def quarantine_show(
    engine: Engine, record_id: int, *, table_prefix: str = "inboxguard_"
) -> QuarantineDetail | None:
    """One record with its replays and actions, or None when no record has that id."""
    inbox = open_inbox(engine, table_prefix)
    record = inbox.quarantine_record(record_id)
    return None if record is None else quarantine_detail(inbox, record)


def quarantine_detail(inbox: Inbox, record: QuarantineRecord) -> QuarantineDetail:
    """``record`` with its audit trails; a trail whose table a database
    created before it existed has not got is empty."""
    present = set(inspect(inbox.engine).get_table_names())
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


def release_quarantine(
    engine: Engine,
    record_id: int,
    *,
    actor: str,
    reason: str,
    table_prefix: str = "inboxguard_",
    clock: Clock | None = None,
) -> QuarantineAction | None:
    """Let a quarantined command be processed again (see
    :meth:`Inbox.release_quarantine`); None when no open record has that id.

    Raises:
        ConfigurationError: ``actor`` or ``reason`` is empty, or the
            ``quarantine_actions`` table is missing (the message names the fix).
    """
    inbox = open_inbox(engine, table_prefix, clock)
    return inbox.release_quarantine(record_id, actor=actor, reason=reason)


def resolve_quarantine(
    engine: Engine,
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
    inbox = open_inbox(engine, table_prefix, clock)
    if not inbox.resolve_quarantine(record_id, actor=actor, reason=reason):
        return None
    return inbox.quarantine_actions(record_id)[-1]
