"""``explain``: why one command was, or would be, skipped."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import or_, select
from sqlalchemy.engine import Engine

from inboxguard._core.clock import Clock, checked_now, utc_now
from inboxguard.effects import EffectLedger, EffectRecord
from inboxguard.errors import ConfigurationError
from inboxguard.inbox import InboxRecord, InboxStore
from inboxguard.operations._quarantine import open_inbox, quarantine_details_of
from inboxguard.operations._records import CommandExplanation
from inboxguard.operations._redis import explain_redis
from inboxguard.operations._tables import present_tables
from inboxguard.outbox import Outbox
from inboxguard.sql.tables import effect_tables, outbox_tables

__all__ = ["explain"]

#: What may follow a command ID in the key of an effect it caused.
_KEY_SEPARATORS = ("/", ":", ".")


def explain(
    engine: Engine | InboxStore,
    *,
    consumer: str,
    command_id: str,
    table_prefix: str = "inboxguard_",
    clock: Clock | None = None,
    effects_limit: int = 20,
    hash_tag: str | None = None,
    quarantine_limit: int = 100,
) -> CommandExplanation:
    """Explain the inbox's decision for ``command_id`` at ``consumer``: the
    stored evidence, every quarantine record with its actions, the ledger's
    effects of the command and its outbox row. Read-only; the outbox and
    ledger parts are empty when their tables are absent. Given a
    :class:`~inboxguard.RedisInbox`, its evidence (``hash_tag``, when given,
    must be the command ID's own tag) and records; no effects or outbox row.

    The quarantine part holds the command's oldest ``quarantine_limit``
    records with the counts of all of them, read in the same few queries
    however many there are.

    Raises:
        ConfigurationError: the inbox tables are missing, the prefix is
            unusable, or ``quarantine_limit`` is not a positive int.
    """
    limit = _positive(quarantine_limit, "quarantine_limit")
    if not isinstance(engine, Engine):
        return explain_redis(engine, consumer, command_id, hash_tag, clock, limit)
    now = checked_now(clock or utc_now)
    inbox = open_inbox(engine, table_prefix, clock)
    evidence = inbox.lookup(consumer, command_id)
    counts = inbox.quarantine_statuses_of(consumer, command_id)
    records = inbox.quarantine_records_of(consumer, command_id, limit=limit) if counts else []
    quarantine = quarantine_details_of(inbox, records, consumer, command_id)
    out_table, fx_table = outbox_tables(table_prefix).outbox, effect_tables(table_prefix).effects
    present = present_tables(engine, out_table, fx_table)
    effects = _effects(engine, table_prefix, command_id, effects_limit, present)
    outbox = (
        Outbox(engine, table_prefix=table_prefix).get(command_id)
        if out_table.name in present
        else None
    )
    verdict = "duplicate" if evidence is not None else "fresh"
    open_count = counts.get("open", 0)
    summary = _summary(evidence, now, open_count)
    return CommandExplanation(
        consumer,
        command_id,
        now,
        verdict,
        summary,
        evidence,
        quarantine,
        effects,
        outbox,
        quarantine_total=sum(counts.values()),
        quarantine_open=open_count,
    )


def _positive(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        msg = f"{name} must be a positive int (how many records to show), got {value!r}"
        raise ConfigurationError(msg)
    return value


def _effects(
    engine: Engine, prefix: str, command_id: str, limit: int, present: set[str]
) -> tuple[EffectRecord, ...]:
    table = effect_tables(prefix).effects
    if table.name not in present:
        return ()
    key = table.c.effect_key
    escaped = command_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    like = [key.like(f"{escaped}{sep}%", escape="\\") for sep in _KEY_SEPARATORS]
    stmt = select(key).where(or_(key == command_id, *like)).order_by(key).limit(limit)
    with engine.connect() as conn:
        keys = conn.execute(stmt).scalars().all()
    ledger = EffectLedger(engine, table_prefix=prefix)
    found = (ledger.get(k) for k in keys)
    return tuple(r for r in found if r is not None)


def _summary(evidence: InboxRecord | None, now: dt.datetime, open_count: int) -> str:
    waiting = (
        f"; {open_count} quarantine record(s) are open (release one to let a refused"
        " payload be processed)"
        if open_count
        else ""
    )
    if evidence is None:
        return (
            "no evidence is stored: the next delivery is processed, unless its sent time"
            " is older than the retention horizon (then it is quarantined as"
            f" beyond_retention){waiting}"
        )
    kept = (
        f"kept until {evidence.expires_at.isoformat()}"
        if evidence.expires_at > now
        else f"expired at {evidence.expires_at.isoformat()} and still counts until purge deletes it"
    )
    return (
        f"processed at {evidence.processed_at.isoformat()}: a delivery whose payload digest"
        f" is {evidence.digest} is skipped as a duplicate; any other payload is quarantined"
        f" as payload_mismatch; the evidence is {kept}{waiting}"
    )
