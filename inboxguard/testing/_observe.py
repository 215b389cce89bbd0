"""After a case: fill its record from what the inbox, the ledger and the provider hold."""

from __future__ import annotations

from collections import Counter

from sqlalchemy import select

from inboxguard.effects import EffectLedger
from inboxguard.inbox import Inbox
from inboxguard.testing._provider import FakeProvider
from inboxguard.testing._record import CaseRecord, durable_receipts, inbox_state

__all__ = ["observe"]


def observe(
    record: CaseRecord,
    inbox: Inbox,
    ledger: EffectLedger | None,
    provider: FakeProvider | None,
    runs: Counter[str],
) -> CaseRecord:
    """Name the command (the only one the handler claimed, else the inbox's
    only row) and fill the record's counts and states; return it."""
    if record.command_id is None and len(runs) == 1:
        record.command_id = next(iter(runs))
    if record.command_id is None:  # no fresh claim: the inbox's only row, if one
        record.consumer, record.command_id = _only_row(inbox, record.consumer)
    if record.consumer is None and record.command_id is not None:
        record.consumer = _consumer_of(inbox, record.command_id)
    cid = record.command_id
    record.handler_runs = runs[cid] if cid is not None else sum(runs.values())
    record.inbox_state = inbox_state(inbox, record.consumer, cid)
    if provider is not None:
        record.provider_requests = provider.requests
        record.provider_effects = provider.effects
        if record.effect_key is None and len(provider.keys()) == 1:
            record.effect_key = provider.keys()[0]
    if ledger is not None and record.effect_key is not None:
        effect = ledger.get(record.effect_key)
        record.receipts = durable_receipts(effect)
        record.ledger_state = "absent" if effect is None else str(effect.state)
    return record


def _only_row(inbox: Inbox, consumer: str | None) -> tuple[str | None, str | None]:
    table = inbox.tables.inbox
    query = select(table.c.consumer, table.c.command_id).limit(2)
    if consumer is not None:
        query = query.where(table.c.consumer == consumer)
    with inbox.engine.connect() as conn:
        rows = conn.execute(query).all()
    return (str(rows[0][0]), str(rows[0][1])) if len(rows) == 1 else (consumer, None)


def _consumer_of(inbox: Inbox, command_id: str) -> str | None:
    table = inbox.tables.inbox
    with inbox.engine.connect() as conn:
        found = conn.execute(select(table.c.consumer).where(table.c.command_id == command_id))
        names: set[str] = {row[0] for row in found}
    if len(names) == 1:
        return names.pop()
    quarantined = {r.consumer for r in inbox.quarantined(status=None, limit=1000)}
    return quarantined.pop() if len(quarantined) == 1 else None
