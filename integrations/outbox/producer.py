"""Commit orders, each with its outbox row, in one transaction per order.

``python -m integrations.outbox.producer FIRST COUNT``
"""

from __future__ import annotations

import sys

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import inboxguard
from integrations.outbox.config import Settings, outbox, tables


def produce(first: int, count: int) -> None:
    settings = Settings.from_env()
    engine = create_engine(settings.database_url)
    box = outbox(engine, settings.prefix)
    _, orders, _ = tables(settings.prefix)
    for order_id in range(first, first + count):
        with Session(engine) as session, session.begin():
            session.execute(orders.insert().values(id=order_id, state="placed"))
            box.add(
                session,
                command_id=inboxguard.command_id_for("order.ship", order_id=order_id),
                destination=settings.queue,
                payload={"order_id": order_id},
            )
    engine.dispose()


if __name__ == "__main__":
    produce(int(sys.argv[1]), int(sys.argv[2]))
