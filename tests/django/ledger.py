"""The consumer's own change in the Django store's tests: a row per applied
command in a table of the test's own, written on Django's connection."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, Integer, MetaData, String, Table, select
from sqlalchemy.engine import Engine


class Ledger:
    """``<prefix>applied(command_id, amount)`` on the store's database."""

    def __init__(self, engine: Engine, prefix: str, alias: str) -> None:
        self.engine = engine
        self.alias = alias
        self.metadata = MetaData()
        self.table = Table(
            f"{prefix}applied",
            self.metadata,
            Column("id", Integer, primary_key=True, autoincrement=True),
            Column("command_id", String(255), nullable=False),
            Column("amount", Integer, nullable=False),
        )
        self.metadata.create_all(engine)

    def mutate(self, command_id: str, amount: int = 1) -> None:
        """Insert a row on the connection of the current atomic() block."""
        from django.db import connections

        with connections[self.alias].cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {self.table.name} (command_id, amount) VALUES (%s, %s)",
                [command_id, amount],
            )

    def applied(self) -> list[str]:
        """Committed command IDs, in order."""
        t = self.table
        with self.engine.connect() as conn:
            return list(conn.execute(select(t.c.command_id).order_by(t.c.id)).scalars())

    def drop(self) -> None:
        """Drop the table."""
        self.metadata.drop_all(self.engine)


def quarantined(box: Any, consumer: str, command_id: str) -> list[Any]:
    """Every quarantine record of a command, whatever its status."""
    return [r for r in box.quarantined(consumer, status=None) if r.command_id == command_id]
