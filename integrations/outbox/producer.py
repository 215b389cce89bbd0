"""Commit orders, each with its outbox row, in one transaction per order.

``python -m integrations.outbox.producer FIRST COUNT``

With ``OUTBOX_PAYLOAD=dramatiq-ship`` each row is a command for the Dramatiq
reference app's ``ship(order_id, sku, qty)`` actor, whose inbox deduplicates
on ``order_id``: the outbox command ID is passed as that argument.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import inboxguard
from integrations.outbox.config import Settings, outbox, tables


def command(order_id: int, queue: str) -> tuple[str, str, Any]:
    """(command ID, destination, payload) of the shipment of ``order_id``."""
    cid = inboxguard.command_id_for("order.ship", order_id=order_id)
    if os.environ.get("OUTBOX_PAYLOAD") == "dramatiq-ship":
        return cid, "ship", {"args": [], "kwargs": {"order_id": cid, "sku": "sku-1", "qty": 1}}
    return cid, queue, {"order_id": order_id}


def produce(first: int, count: int) -> None:
    settings = Settings.from_env()
    engine = create_engine(settings.database_url)
    box = outbox(engine, settings.prefix)
    _, orders, _ = tables(settings.prefix)
    for order_id in range(first, first + count):
        with Session(engine) as session, session.begin():
            session.execute(orders.insert().values(id=order_id, state="placed"))
            cid, destination, payload = command(order_id, settings.queue)
            box.add(session, command_id=cid, destination=destination, payload=payload)
    engine.dispose()


if __name__ == "__main__":
    produce(int(sys.argv[1]), int(sys.argv[2]))
