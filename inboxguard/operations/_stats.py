"""``stats``: per consumer, the evidence and the open quarantine; the outbox
backlog; the effect ledger by state. Read-only, one short transaction each."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Connection, Table, func, select
from sqlalchemy.engine import Engine

from inboxguard._core.clock import Clock, checked_now, utc_now
from inboxguard.effects.state import EffectState
from inboxguard.inbox import InboxStore
from inboxguard.operations._records import ConsumerStats, EffectStats, OutboxStats, Stats
from inboxguard.operations._redis import stats_redis
from inboxguard.operations._tables import present_tables
from inboxguard.sql.dialects import database_for
from inboxguard.sql.tables import effect_tables, inbox_tables, outbox_tables

__all__ = ["stats"]


def stats(
    engine: Engine | InboxStore,
    *,
    table_prefix: str = "inboxguard_",
    clock: Clock | None = None,
) -> Stats:
    """Read the inbox, outbox and effect-ledger tables of ``table_prefix``.

    Each section is None when its tables are absent; nothing is created or
    changed. Ages are measured from ``clock()`` (default: UTC now). Given a
    :class:`~inboxguard.RedisInbox` instead of an engine, its evidence and
    open records per consumer and the server's durability (``table_prefix``
    is not used: the inbox has its key prefix).

    Raises:
        ConfigurationError: ``table_prefix`` is unusable, or the clock
            returned something unusable.
    """
    if not isinstance(engine, Engine):
        return stats_redis(engine, clock)
    inbox, outbox, ledger = (
        inbox_tables(table_prefix),
        outbox_tables(table_prefix),
        effect_tables(table_prefix),
    )
    now = checked_now(clock or utc_now)
    present = present_tables(engine, inbox.inbox, inbox.quarantine, outbox.outbox, ledger.effects)
    with engine.connect() as conn:
        consumers = (
            _consumers(conn, inbox.inbox, inbox.quarantine, now)
            if {inbox.inbox.name, inbox.quarantine.name} <= present
            else None
        )
        out = _outbox(conn, outbox.outbox, now) if outbox.outbox.name in present else None
        fx = _effects(conn, ledger.effects, now) if ledger.effects.name in present else None
    return Stats(now, table_prefix, consumers, out, fx)


def _consumers(
    conn: Connection, evidence: Table, quarantine: Table, now: dt.datetime
) -> tuple[ConsumerStats, ...]:
    ev, q = evidence.c, quarantine.c
    rows = conn.execute(
        select(ev.consumer, func.count(), func.min(ev.processed_at)).group_by(ev.consumer)
    ).all()
    open_stmt = select(q.consumer, func.count()).where(q.status == "open").group_by(q.consumer)
    open_counts: dict[str, int] = {str(c): int(n) for c, n in conn.execute(open_stmt).all()}
    found: dict[str, ConsumerStats] = {}
    for consumer, count, oldest in rows:
        at = _aware(oldest)
        found[consumer] = ConsumerStats(
            consumer, int(count), open_counts.get(consumer, 0), at, _age(now, at)
        )
    for consumer, count in open_counts.items():
        if consumer not in found:
            found[consumer] = ConsumerStats(consumer, 0, count, None, None)
    return tuple(found[name] for name in sorted(found))


def _outbox(conn: Connection, table: Table, now: dt.datetime) -> OutboxStats:
    statements = database_for(conn.dialect).outbox(outbox_tables(_prefix_of(table, "outbox")))
    backlog, oldest = conn.execute(statements.backlog_stmt).one()
    dead = conn.execute(statements.count_of("dead")).scalar_one()
    delivered = conn.execute(statements.count_of("delivered")).scalar_one()
    at = _aware(oldest) if backlog else None
    return OutboxStats(int(backlog), at, _age(now, at), int(dead), int(delivered))


def _effects(conn: Connection, table: Table, now: dt.datetime) -> EffectStats:
    c = table.c
    grouped = conn.execute(select(c.state, func.count()).group_by(c.state)).all()
    counts: dict[str, int] = {str(state): int(n) for state, n in grouped}
    by_state = {state.value: int(counts.pop(state.value, 0)) for state in EffectState}
    by_state.update(counts)  # a state of a newer release
    unknown = EffectState.UNKNOWN.value
    oldest = conn.execute(select(func.min(c.updated_at)).where(c.state == unknown)).scalar()
    at = _aware(oldest)
    return EffectStats(by_state, at, _age(now, at))


def _prefix_of(table: Table, suffix: str) -> str:
    return table.name.removesuffix(suffix)


def _aware(value: object) -> dt.datetime | None:
    """An aggregate's time in UTC: ``min()`` may come back without the column's
    type (naive, or text on SQLite), and a stored time is always UTC."""
    if value is None:
        return None
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if not isinstance(value, dt.datetime):
        msg = f"the database returned {value!r} for a time"
        raise TypeError(msg)
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def _age(now: dt.datetime, at: dt.datetime | None) -> dt.timedelta | None:
    return None if at is None else max(now - at, dt.timedelta(0))
