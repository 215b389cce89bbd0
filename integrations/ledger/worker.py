"""A guarded consumer that charges through the effect ledger.

Run it (any SQLAlchemy URL; SQLite by default)::

    python -m integrations.ledger.worker produce --db sqlite:///billing.db --invoices 20
    python -m integrations.ledger.worker run --db sqlite:///billing.db --chaos 7
    python -m integrations.ledger.worker report --db sqlite:///billing.db

``produce`` queues one charge command per invoice, each delivered twice (a
durable, at-least-once queue in a table). ``run`` consumes until the queue is
empty: every message runs inside ``inbox.guard`` (the local write: the invoice
is marked paid with the charge's reference) and charges through
``ledger.execute`` with an effect key that belongs to the invoice, not to the
delivery. ``--chaos SEED`` makes the sandbox gateway lose responses and time
out; ``--kill-after-charges N`` kills the process right after the gateway's
N-th charge, before anything is recorded; running again finishes the work.
``report`` prints one JSON line: invoices paid, charges at the gateway, ledger
states.

Two compositions, chosen by database:

* ``inside`` (PostgreSQL, MariaDB): the charge happens inside the guarded
  transaction. A duplicate delivery is skipped by the inbox before it reaches
  the ledger; a crash after the charge rolls the local transaction back, and
  the redelivery finds the effect in the ledger (stored receipt, or lookup).
* ``before`` (SQLite, one writer at a time): the ledger commits its own
  transactions, which SQLite cannot do while the guarded transaction holds the
  write lock, so the charge runs first and the guarded transaction records it.
  A duplicate delivery reaches the ledger, which returns the stored receipt
  without calling the gateway.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import random
import sys
import time
from collections import Counter
from typing import Any

from sqlalchemy import Column, Integer, MetaData, String, Table, Text, create_engine, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

import inboxguard
from inboxguard import EffectLedger, Inbox, Receipt, is_retryable
from integrations.ledger.gateway import SandboxGateway

CONSUMER = "billing.charge-invoice"
PREFIX = "billing_"


def business_tables(prefix: str) -> tuple[MetaData, Table, Table]:
    """The consumer's own state (invoices) and the durable queue (messages)."""
    md = MetaData()
    invoices = Table(
        f"{prefix}invoices",
        md,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("amount", Integer, nullable=False),
        Column("charge", String(255), nullable=True),
        Column("paid_times", Integer, nullable=False, default=0),
    )
    messages = Table(
        f"{prefix}messages",
        md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("body", Text, nullable=False),
        Column("acked", Integer, nullable=False, default=0),
    )
    return md, invoices, messages


class Billing:
    """The worker's parts, on one database."""

    def __init__(self, url: str, prefix: str, *, lookup: bool, lease: dt.timedelta) -> None:
        self.engine: Engine = create_engine(url)
        self.inbox = Inbox(self.engine, retention=dt.timedelta(days=30), table_prefix=prefix)
        self.ledger = EffectLedger(self.engine, table_prefix=prefix)
        self.gateway = SandboxGateway(self.engine, table_prefix=prefix, supports_lookup=lookup)
        self.md, self.invoices, self.messages = business_tables(prefix)
        self.lease = lease
        self.mode = "before" if self.engine.dialect.name == "sqlite" else "inside"

    def create_schema(self) -> None:
        self.inbox.create_schema()
        self.ledger.create_schema()
        self.gateway.create_schema()
        self.md.create_all(self.engine)

    # -- the consumer -----------------------------------------------------------------

    def charge(self, message: dict[str, Any]) -> Receipt:
        """The effect: one charge per invoice, whoever delivers the command."""
        return self.ledger.execute(
            f"invoice-{message['invoice_id']}/charge",
            self.gateway,
            {"amount": message["amount"], "currency": "EUR"},
            lease=self.lease,
        )

    def handle(self, message: dict[str, Any]) -> None:
        """Apply one delivery: guard, charge, record the charge on the invoice."""
        early = self.charge(message) if self.mode == "before" else None
        with Session(self.engine) as session, session.begin():
            with self.inbox.guard(
                session,
                consumer=CONSUMER,
                command_id=message["command_id"],
                payload=message,
                details={"message": message},
            ) as entry:
                if entry.duplicate:
                    return
                receipt = early or self.charge(message)
                inv = self.invoices
                session.execute(
                    inv.update()
                    .where(inv.c.id == message["invoice_id"])
                    .values(charge=receipt.reference, paid_times=inv.c.paid_times + 1)
                )
                entry.result = {"charge": receipt.reference}

    # -- the queue --------------------------------------------------------------------

    def produce(self, invoices: int, seed: int) -> None:
        rng = random.Random(seed)
        rows, bodies = [], []
        for i in range(invoices):
            amount = 100 + i
            rows.append({"id": i, "amount": amount, "charge": None, "paid_times": 0})
            command = {
                "command_id": inboxguard.command_id_for("invoice.charge", invoice_id=i),
                "invoice_id": i,
                "amount": amount,
            }
            bodies += [json.dumps(command)] * 2
        rng.shuffle(bodies)
        with self.engine.begin() as conn:
            conn.execute(self.invoices.insert(), rows)
            conn.execute(self.messages.insert(), [{"body": b, "acked": 0} for b in bodies])

    def run(self, deadline: float) -> Counter[str]:
        """Consume until every message is acked; retry retryable failures later."""
        seen: Counter[str] = Counter()
        m = self.messages
        while time.monotonic() < deadline:
            with self.engine.connect() as conn:
                pending = conn.execute(select(m.c.id, m.c.body).where(m.c.acked == 0)).all()
            if not pending:
                return seen
            for row in pending:
                try:
                    self.handle(json.loads(row.body))
                except Exception as error:
                    if not is_retryable(error):
                        raise
                    seen[type(error).__name__] += 1
                    continue
                with self.engine.begin() as conn:  # the ack, after the commit
                    conn.execute(m.update().where(m.c.id == row.id).values(acked=1))
                seen["acked"] += 1
            time.sleep(0.05)  # the broker's redelivery delay
        msg = "the queue did not drain before the deadline"
        raise SystemExit(msg)

    def report(self) -> dict[str, Any]:
        inv = self.invoices
        with self.engine.connect() as conn:
            rows = conn.execute(select(inv.c.id, inv.c.charge, inv.c.paid_times)).all()
        states = Counter(str(r.state) for r in self.ledger.effects(limit=100_000))
        receipts = {
            r.effect_key: r.receipt.reference if r.receipt else None
            for r in self.ledger.effects(limit=100_000)
        }
        return {
            "invoices": len(rows),
            "paid_once": sum(1 for r in rows if r.paid_times == 1),
            "paid_twice_or_more": sum(1 for r in rows if r.paid_times > 1),
            "matching_receipts": sum(
                1 for r in rows if r.charge and receipts.get(f"invoice-{r.id}/charge") == r.charge
            ),
            "gateway_charges": self.gateway.charges(),
            "gateway_requests": self.gateway.requests(),
            "ledger_states": dict(states),
        }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m integrations.ledger.worker")
    p.add_argument("command", choices=["produce", "run", "report"])
    p.add_argument("--db", default="sqlite:///billing.db")
    p.add_argument("--prefix", default=PREFIX)
    p.add_argument("--invoices", type=int, default=20)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--chaos", type=int, default=None, help="seed of lost responses and timeouts")
    p.add_argument("--kill-after-charges", type=int, default=None)
    p.add_argument("--no-lookup", action="store_true", help="a gateway without lookup")
    p.add_argument("--lease-seconds", type=float, default=2.0)
    p.add_argument("--timeout", type=float, default=90.0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    billing = Billing(
        args.db,
        args.prefix,
        lookup=not args.no_lookup,
        lease=dt.timedelta(seconds=args.lease_seconds),
    )
    billing.create_schema()
    if args.command == "produce":
        billing.produce(args.invoices, args.seed)
        return 0
    if args.command == "report":
        print(json.dumps(billing.report(), sort_keys=True))
        return 0
    if args.chaos is not None:
        rng = random.Random(args.chaos)
        billing.gateway.script = [
            rng.choice(["ok", "ok", "accept_then_timeout", "timeout"]) for _ in range(200)
        ]
    if args.kill_after_charges is not None:
        limit = args.kill_after_charges

        def die_after(key: str) -> None:
            if billing.gateway.charges() >= limit:
                os._exit(137)  # killed after the gateway charged, before the ledger recorded

        billing.gateway.after_apply = die_after
    seen = billing.run(time.monotonic() + args.timeout)
    print(json.dumps({"mode": billing.mode, **seen}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
