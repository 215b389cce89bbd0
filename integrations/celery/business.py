"""The business side: account balances and a ledger, and the check that matters.

The ledger has no uniqueness of its own on ``transfer_id``: a command applied
twice shows up as two rows and a balance that disagrees with one application.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Column,
    Integer,
    MetaData,
    String,
    Table,
    func,
    select,
    update,
)
from sqlalchemy.engine import Engine

import inboxguard

ACCOUNTS = [f"acct-{n}" for n in range(8)]
#: Table prefix (after the app's) of the benchmark floor's inbox table, which
#: only ``python -m benchmarks celery`` creates (``tasks.apply_transfer_evidence``).
EVIDENCE_PREFIX = "ev_"


@dataclass(frozen=True)
class Tables:
    metadata: MetaData
    accounts: Table
    ledger: Table


def tables(prefix: str) -> Tables:
    metadata = MetaData()
    accounts = Table(
        f"{prefix}accounts",
        metadata,
        Column("id", String(64), primary_key=True),
        Column("balance", Integer, nullable=False),
    )
    ledger = Table(
        f"{prefix}ledger",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("transfer_id", String(64), nullable=False),
        Column("account", String(64), nullable=False),
        Column("amount", Integer, nullable=False),
    )
    return Tables(metadata, accounts, ledger)


def make_inbox(
    engine: Engine,
    prefix: str,
    retention: dt.timedelta,
    lock_timeout: dt.timedelta | None = None,
) -> inboxguard.Inbox:
    """The app's inbox; ``lock_timeout`` None keeps the inbox's default claim wait."""
    # The dead-letter replay window plus an hour for clock skew and purge lag.
    policy = inboxguard.RetentionPolicy(dead_letter_replay=retention, margin=dt.timedelta(hours=1))
    wait = {} if lock_timeout is None else {"lock_timeout": lock_timeout}
    return inboxguard.Inbox(engine, retention=policy, table_prefix=f"{prefix}ib_", **wait)


def create_schema(engine: Engine, prefix: str, retention: dt.timedelta) -> None:
    """Create the business and inbox tables and the accounts (idempotent)."""
    t = tables(prefix)
    t.metadata.create_all(engine)
    make_inbox(engine, prefix, retention).create_schema()
    with engine.begin() as conn:
        present = set(conn.execute(select(t.accounts.c.id)).scalars())
        missing = [{"id": a, "balance": 0} for a in ACCOUNTS if a not in present]
        if missing:
            conn.execute(t.accounts.insert(), missing)


def drop_schema(engine: Engine, prefix: str, retention: dt.timedelta) -> None:
    tables(prefix).metadata.drop_all(engine)
    make_inbox(engine, prefix, retention).drop_schema()


def apply_transfer(
    session: Any, t: Tables, transfer_id: str, account: str, amount: int, delay: float = 0.0
) -> dict[str, Any]:
    """The business mutation: one ledger row and the balance it moves."""
    session.execute(
        t.ledger.insert().values(transfer_id=transfer_id, account=account, amount=amount)
    )
    session.execute(
        update(t.accounts)
        .where(t.accounts.c.id == account)
        .values(balance=t.accounts.c.balance + amount)
    )
    balance = session.execute(
        select(t.accounts.c.balance).where(t.accounts.c.id == account)
    ).scalar_one()
    if delay:
        time.sleep(delay)  # only to let tests kill a worker mid-transaction
    return {"transfer_id": transfer_id, "balance": balance}


@dataclass(frozen=True)
class LedgerCheck:
    rows: int
    transfers: int
    applied_twice: int
    balances_match: bool


def check(engine: Engine, prefix: str) -> LedgerCheck:
    """Rows, distinct transfers, transfers applied more than once, balance == ledger sum."""
    t = tables(prefix)
    with engine.connect() as conn:
        rows = conn.execute(select(func.count()).select_from(t.ledger)).scalar_one()
        transfers = conn.execute(
            select(func.count(func.distinct(t.ledger.c.transfer_id)))
        ).scalar_one()
        sums = dict(
            conn.execute(
                select(t.ledger.c.account, func.sum(t.ledger.c.amount)).group_by(t.ledger.c.account)
            ).all()
        )
        balances = dict(conn.execute(select(t.accounts.c.id, t.accounts.c.balance)).all())
    match = all(balances[a] == int(sums.get(a, 0)) for a in balances)
    return LedgerCheck(int(rows), int(transfers), int(rows) - int(transfers), match)
