"""What the stress run publishes, and how its outcome is checked.

:func:`make_plan` turns the run's settings into the shuffled list of message
bodies (unique commands, re-sends of the same command and payload, and for a
few commands a second message with the same ID and another payload). The plan
is a pure function of the settings and the seed, so the checks know exactly
what each command must have done.

:func:`verify` reads the outcome where a user would look: the ledger and the
accounts (the business data), the inbox and quarantine tables, and the work
and dead-letter queues on the broker.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

from kombu import Connection
from sqlalchemy import create_engine, func, select
from sqlalchemy.engine import Engine

from benchmarks._stress_worker import CONSUMER, business_tables, dead_queue, work_queue
from inboxguard import QuarantineReason
from inboxguard.sql.tables import inbox_tables


@dataclass(frozen=True)
class Plan:
    """The messages of one run and what they must come to."""

    bodies: list[dict[str, Any]]
    unique: int
    duplicates: int
    mismatched: frozenset[str]
    balances: dict[int, int]


def counts(commands: int, duplicates: float, mismatches: float) -> tuple[int, int, int]:
    """(unique commands, duplicate messages, mismatch messages) of ``commands`` messages.

    Raises:
        ValueError: a rate or the count cannot make a plan; names the flag.
    """
    if commands < 1:
        raise ValueError(f"--commands must be at least 1, not {commands}")
    for flag, rate in (("--duplicates", duplicates), ("--mismatches", mismatches)):
        if not 0 <= rate < 1:
            raise ValueError(f"{flag} is a fraction of the messages in [0, 1), not {rate}")
    n_dup, n_mis = round(commands * duplicates), round(commands * mismatches)
    unique = commands - n_dup - n_mis
    if unique < n_mis + (1 if n_dup else 0):
        raise ValueError(
            f"--duplicates {duplicates} and --mismatches {mismatches} leave {unique} unique"
            f" commands for {n_mis} mismatches and {n_dup} re-sends: lower the rates"
        )
    return unique, n_dup, n_mis


def make_plan(
    commands: int, duplicates: float, mismatches: float, accounts: int, seed: int
) -> Plan:
    """The shuffled bodies: a mismatched command gets exactly one other-payload
    message and no re-sends, so exactly one of its two messages is quarantined."""
    unique, n_dup, n_mis = counts(commands, duplicates, mismatches)
    rng = random.Random(seed)
    originals = [
        {
            "command_id": f"c{i:07d}",
            "account": rng.randrange(accounts),
            "amount": rng.randint(1, 1000),
            "version": 1,
        }
        for i in range(unique)
    ]
    mismatched = rng.sample(range(unique), n_mis)
    taken = set(mismatched)
    eligible = [i for i in range(unique) if i not in taken]
    bodies = originals + [originals[rng.choice(eligible)] for _ in range(n_dup)]
    bodies += [{**originals[i], "version": 2} for i in mismatched]
    rng.shuffle(bodies)
    balances: Counter[int] = Counter()
    for body in originals:
        balances[body["account"]] += body["amount"]
    return Plan(
        bodies=bodies,
        unique=unique,
        duplicates=n_dup,
        mismatched=frozenset(originals[i]["command_id"] for i in mismatched),
        balances={a: balances.get(a, 0) for a in range(accounts)},
    )


@dataclass(frozen=True)
class Names:
    """Where one run keeps its state."""

    db_url: str
    broker_url: str
    prefix: str
    queue: str


@dataclass(frozen=True)
class Check:
    """One verified statement about the outcome."""

    name: str
    ok: bool
    detail: str


def queue_state(broker_url: str, queue: str) -> tuple[int, int]:
    """(ready messages, consumers) of the work queue."""
    with Connection(broker_url) as conn:
        _, ready, consumers = work_queue(queue)(conn.default_channel).queue_declare(passive=True)
        return int(ready), int(consumers)


def dead_depth(broker_url: str, queue: str) -> int:
    """Messages in the dead-letter queue."""
    with Connection(broker_url) as conn:
        _, ready, _ = dead_queue(queue)(conn.default_channel).queue_declare(passive=True)
        return int(ready)


def dead_letters(broker_url: str, queue: str) -> list[dict[str, Any]]:
    """The dead-lettered bodies, left in the queue (read unacked; closing the
    connection puts them back)."""
    found = []
    with Connection(broker_url) as conn:
        channel = conn.default_channel
        name = dead_queue(queue).name
        while (message := channel.basic_get(name, no_ack=False)) is not None:
            found.append(json.loads(message.body))
    return found


def progress(engine: Engine, names: Names) -> tuple[int, int]:
    """(ledger rows, quarantine records) so far."""
    _, ledger = business_tables(names.prefix)
    quarantine = inbox_tables(names.prefix).quarantine
    with engine.connect() as conn:
        rows = conn.scalar(select(func.count()).select_from(ledger))
        held = conn.scalar(select(func.count()).select_from(quarantine))
    return int(rows or 0), int(held or 0)


def verify(plan: Plan, names: Names, published: int) -> list[Check]:
    """Every check of the run; call it with no worker running."""
    engine = create_engine(names.db_url)
    accounts, ledger = business_tables(names.prefix)
    tables = inbox_tables(names.prefix)
    expected = {b["command_id"] for b in plan.bodies}
    try:
        with engine.connect() as conn:
            applied = Counter(conn.scalars(select(ledger.c.command_id)))
            versions = dict(conn.execute(select(ledger.c.command_id, ledger.c.version)).all())
            balances = dict(conn.execute(select(accounts.c.id, accounts.c.balance)).all())
            evidence = Counter(
                conn.scalars(
                    select(tables.inbox.c.command_id).where(tables.inbox.c.consumer == CONSUMER)
                )
            )
            held = conn.execute(
                select(tables.quarantine.c.command_id, tables.quarantine.c.reason)
            ).all()
    finally:
        engine.dispose()
    twice = sorted(c for c, n in applied.items() if n > 1)
    missing = sorted(expected - set(applied))
    strange = sorted(set(applied) - expected)
    wrong = {a: (balances.get(a), v) for a, v in plan.balances.items() if balances.get(a) != v}
    held_ids = Counter(c for c, _ in held)
    reasons = Counter(r for _, r in held)
    ready, consumers = queue_state(names.broker_url, names.queue)
    dead = dead_letters(names.broker_url, names.queue)
    dead_ids = Counter(b["command_id"] for b in dead)
    dead_applied = [b["command_id"] for b in dead if versions.get(b["command_id"]) == b["version"]]
    n_mis = len(plan.mismatched)
    return [
        Check(
            "every command applied once (one ledger row each)",
            not twice and not missing and not strange and sum(applied.values()) == plan.unique,
            f"{sum(applied.values())} rows for {plan.unique} commands; applied twice: "
            f"{len(twice)} {twice[:5]}; never applied: {len(missing)} {missing[:5]}",
        ),
        Check(
            "every account balance equals the sum of its commands",
            not wrong,
            f"{len(plan.balances) - len(wrong)}/{len(plan.balances)} accounts right"
            + (f"; wrong (got, want): {dict(list(wrong.items())[:5])}" if wrong else ""),
        ),
        Check(
            "one inbox row per command",
            set(evidence) == expected and sum(evidence.values()) == plan.unique,
            f"{sum(evidence.values())} rows for {plan.unique} commands",
        ),
        Check(
            "every mismatch quarantined, nothing else",
            set(held_ids) == plan.mismatched
            and len(held) == n_mis
            and set(reasons) <= {QuarantineReason.PAYLOAD_MISMATCH},
            f"{len(held)} records for {n_mis} mismatched commands; reasons {dict(reasons)}",
        ),
        Check(
            "every mismatch dead-lettered once, never applied",
            set(dead_ids) == plan.mismatched and len(dead) == n_mis and not dead_applied,
            f"{len(dead)} dead letters for {n_mis} mismatches; applied version dead-lettered: "
            f"{dead_applied[:5]}",
        ),
        Check(
            "nothing left in the work queue",
            ready == 0 and consumers == 0,
            f"{ready} ready, {consumers} consumers, {published} published",
        ),
    ]
