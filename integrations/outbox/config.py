"""Settings shared by the producer, the dispatchers and the consumer, read
from the environment so that tests and benchmarks run them as processes."""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass

from sqlalchemy import Column, Integer, MetaData, String, Table
from sqlalchemy.engine import Engine

import inboxguard


@dataclass(frozen=True)
class Settings:
    database_url: str
    broker_url: str
    prefix: str
    queue: str

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            database_url=os.environ["OUTBOX_DATABASE_URL"],
            broker_url=os.environ.get("OUTBOX_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//"),
            prefix=os.environ.get("OUTBOX_PREFIX", "shop_"),
            queue=os.environ.get("OUTBOX_QUEUE", "shop.ship-order"),
        )


def tables(prefix: str) -> tuple[MetaData, Table, Table]:
    """The business tables: orders (producer side) and shipments (the consumer's effect).

    ``shipments`` has no unique key on purpose: a duplicate effect would show.
    """
    meta = MetaData()
    orders = Table(
        f"{prefix}orders",
        meta,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("state", String(20), nullable=False),
    )
    shipments = Table(
        f"{prefix}shipments",
        meta,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("order_id", Integer, nullable=False),
        Column("pid", Integer, nullable=False),
    )
    return meta, orders, shipments


def outbox(engine: Engine, prefix: str) -> inboxguard.Outbox:
    return inboxguard.Outbox(engine, table_prefix=prefix)


def inbox(engine: Engine, prefix: str) -> inboxguard.Inbox:
    return inboxguard.Inbox(engine, retention=dt.timedelta(days=7), table_prefix=prefix)


def create_all(engine: Engine, prefix: str) -> None:
    meta, _, _ = tables(prefix)
    meta.create_all(engine)
    outbox(engine, prefix).create_schema()
    inbox(engine, prefix).create_schema()


def drop_all(engine: Engine, prefix: str) -> None:
    meta, _, _ = tables(prefix)
    meta.drop_all(engine)
    outbox(engine, prefix).drop_schema()
    inbox(engine, prefix).drop_schema()
