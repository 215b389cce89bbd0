"""The billing side of the Celery and Dramatiq ledger examples: invoices, the
ledger and the sandbox gateway on one prefix, importable without a worker.

The task and the actor are in ``celery_charges`` and ``dramatiq_charges``
(importing those sets up their framework).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, Integer, MetaData, String, Table, func, select
from sqlalchemy.engine import Engine

import inboxguard
from inboxguard import EffectLedger
from integrations.ledger.gateway import SandboxGateway

ACTOR = "charge_invoice"
#: The Celery task's registered name.
CELERY_TASK = "billing.charge_invoice"


def invoices_table(prefix: str) -> Table:
    """One row per invoice; ``paid_times`` shows a double payment if one happens."""
    return Table(
        f"{prefix}invoices",
        MetaData(),
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("amount", Integer, nullable=False),
        Column("charge", String(255), nullable=True),
        Column("paid_times", Integer, nullable=False, default=0),
    )


def parts(engine: Engine, prefix: str) -> tuple[EffectLedger, SandboxGateway, Table]:
    """The ledger, the sandbox gateway and the invoices table of ``prefix``."""
    ledger = EffectLedger(engine, table_prefix=f"{prefix}fx_")
    gateway = SandboxGateway(engine, table_prefix=f"{prefix}gw_")
    return ledger, gateway, invoices_table(prefix)


def create_schema(engine: Engine, prefix: str, invoices: int) -> None:
    """Create the ledger, gateway and invoice tables, with ``invoices`` unpaid invoices."""
    ledger, gateway, table = parts(engine, prefix)
    ledger.create_schema()
    gateway.create_schema()
    table.create(engine, checkfirst=True)
    with engine.begin() as conn:
        conn.execute(
            table.insert(),
            [
                {"id": i, "amount": 100 + i, "charge": None, "paid_times": 0}
                for i in range(invoices)
            ],
        )


def drop_schema(engine: Engine, prefix: str) -> None:
    """Drop what :func:`create_schema` created."""
    ledger, gateway, table = parts(engine, prefix)
    table.drop(engine, checkfirst=True)
    gateway.drop_schema()
    ledger.drop_schema()


def charge_message(queue: str, invoice_id: int, amount: int) -> Any:
    """A Dramatiq message for ``charge_invoice``, built without importing the worker."""
    from dramatiq import Message

    return Message(
        queue_name=queue,
        actor_name=ACTOR,
        args=(),
        kwargs=charge_kwargs(invoice_id, amount),
        options={},
    )


def charge_kwargs(invoice_id: int, amount: int) -> dict[str, Any]:
    """The arguments of a charge command; its ID derives from the invoice."""
    command_id = inboxguard.command_id_for("invoice.charge", invoice_id=invoice_id)
    return {"command_id": command_id, "invoice_id": invoice_id, "amount": amount}


def paid(engine: Engine, prefix: str) -> dict[int, tuple[str | None, int]]:
    """Each invoice's recorded charge and how many times it was paid."""
    table = invoices_table(prefix)
    with engine.connect() as conn:
        rows = conn.execute(select(table.c.id, table.c.charge, table.c.paid_times)).all()
    return {int(r.id): (r.charge, int(r.paid_times)) for r in rows}


def unpaid(engine: Engine, prefix: str) -> int:
    """Invoices not paid yet."""
    table = invoices_table(prefix)
    with engine.connect() as conn:
        stmt = select(func.count()).select_from(table).where(table.c.paid_times == 0)
        return int(conn.execute(stmt).scalar_one())
