"""The inbox's evidence partitioned by expiry (``Inbox(partitioning=...)``):
schema, partitions created ahead, and the purge's partition step.

The statements live in :mod:`inboxguard.sql.dialects.postgresql.partitions`;
this collaborator of :class:`inboxguard.Inbox` decides when they run.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from sqlalchemy import Connection, MetaData, func, select
from sqlalchemy.engine import Engine

from inboxguard._core.clock import Clock, checked_now
from inboxguard._core.retention import RetentionPolicy
from inboxguard.errors import ConfigurationError
from inboxguard.sql.dialects import database_for, partitioning_unsupported
from inboxguard.sql.dialects.postgresql.partition_catalog import LayoutFacts
from inboxguard.sql.dialects.postgresql.partition_periods import Granularity, next_period
from inboxguard.sql.dialects.postgresql.partitions import DropOutcome, PartitionLayout
from inboxguard.sql.tables import InboxTables

__all__ = [
    "DEFAULT_AHEAD",
    "Partitions",
    "batch_on_partitions_error",
    "check_layout",
    "unexpected_layout",
]

#: How many periods past the expiry of a claim made now ``create_partitions()``
#: and every purge create by default.
DEFAULT_AHEAD = 3
_MOVE = "see 'Moving an existing inbox' in docs/scaling.md"


class Partitions:
    """One inbox's partitions: created with the schema, ahead by maintenance,
    dropped whole by the purge."""

    def __init__(
        self,
        engine: Engine,
        tables: InboxTables,
        granularity: Granularity,
        retention: RetentionPolicy,
        clock: Clock,
    ) -> None:
        database = database_for(engine.dialect)
        if not database.supports_partitioning:
            raise partitioning_unsupported(database.label)
        self._engine = engine
        self._retention = retention
        self._clock = clock
        self.layout = PartitionLayout(tables, granularity)
        #: The tables the purge's row-by-row expiry step works on: the DEFAULT
        #: partition only (every other partition goes whole).
        self.row_tables = replace(tables, inbox=self.layout.default)

    def create_schema(self) -> list[str]:
        """Create the partitioned inbox table, its DEFAULT partition and the
        partitions ahead, and the unique index of any partition lacking it;
        return the partitions created.

        Raises:
            ConfigurationError: an unpartitioned inbox table already exists,
                or a partition holds a command twice.
        """
        with self._engine.connect() as conn:
            if self.layout.is_partitioned(conn) is False:
                raise unexpected_layout(self.layout.name, partitioned=False)
            created = self.layout.create(conn, *self._window(None, DEFAULT_AHEAD))
            self.layout.add_unique_indexes(conn)
            return created

    def check_schema(self) -> None:
        """Refuse an inbox table that is not partitioned, has not its DEFAULT
        partition, or has a partition without the unique (consumer,
        command_id) index.

        Raises:
            ConfigurationError: naming each fault and its fix.
        """
        with self._engine.connect() as conn:
            facts = self.layout.facts(conn)
            if facts is None:
                return  # check_tables names the missing table
            if not facts.partitioned:
                raise unexpected_layout(self.layout.name, partitioned=False)
            faults = _layout_faults(facts)
        if faults:
            msg = f"the partitioned inbox table {self.layout.name!r} " + "; ".join(faults)
            raise ConfigurationError(msg)

    def create_ahead(self, *, now: dt.datetime | None, ahead: int) -> list[str]:
        """Create the missing partitions up to ``ahead`` periods past the
        expiry of a claim made at ``now``, and the unique index of any
        partition lacking it; return the partitions created."""
        _check_ahead(ahead)
        with self._engine.connect() as conn:
            created = self.layout.create_ahead(conn, *self._window(now, ahead))
            self.layout.add_unique_indexes(conn)
            return created

    def purge_step(self, conn: Connection, now: dt.datetime) -> tuple[list[str], DropOutcome]:
        """The purge's partition step, on the purge's connection under its
        lock: create the partitions ahead, then drop the expired ones."""
        created = self.layout.create_ahead(conn, *self._window(now, DEFAULT_AHEAD))
        return created, self.layout.drop_expired(conn, now)

    def droppable_rows(self, conn: Connection, now: dt.datetime) -> int:
        """Rows in the partitions whose whole range has expired at ``now``
        (what a purge would drop, unless quarantine holds a partition)."""
        naive = now.astimezone(dt.UTC).replace(tzinfo=None)
        granularity = self.layout.granularity
        total = 0
        for name, start in self.layout.partitions(conn).items():
            if next_period(start, granularity) > naive:
                break
            part = self.layout.default.to_metadata(MetaData(), name=name)
            total += int(conn.execute(select(func.count()).select_from(part)).scalar_one())
        return total

    def _window(self, now: dt.datetime | None, ahead: int) -> tuple[dt.datetime, dt.datetime]:
        at = checked_now(self._clock) if now is None else now
        return at, self.layout.horizon_end(at, self._retention.horizon, ahead)


def check_layout(engine: Engine, tables: InboxTables, partitions: Partitions | None) -> None:
    """Refuse an inbox table whose layout (partitioned or not) is not the one
    the inbox is configured with; PostgreSQL only (nothing else partitions).

    Raises:
        ConfigurationError: the layouts differ, naming the fix.
    """
    if partitions is not None:
        partitions.check_schema()
        return
    if not database_for(engine.dialect).supports_partitioning:
        return
    with engine.connect() as conn:
        if PartitionLayout(tables, "daily").is_partitioned(conn):
            raise unexpected_layout(tables.inbox.name, partitioned=True)


def unexpected_layout(name: str, *, partitioned: bool) -> ConfigurationError:
    """The error for an inbox table whose layout is not the configured one."""
    if partitioned:
        msg = (
            f"the inbox table {name!r} is partitioned by expiry, but this Inbox has no"
            " partitioning=...: pass Inbox(..., partitioning=<the granularity it was"
            " created with>), e.g. 'daily'"
        )
    else:
        msg = (
            f"the inbox table {name!r} exists and is not partitioned, but this Inbox has"
            f" partitioning=...: move the table first ({_MOVE}), or drop partitioning"
        )
    return ConfigurationError(msg)


def _layout_faults(facts: LayoutFacts) -> list[str]:
    """What ``check_schema()`` refuses in a partitioned table, each with its fix."""
    faults: list[str] = []
    default = facts.expected_default
    if facts.default is None and not facts.default_table_exists:
        faults.append(
            f"has no DEFAULT partition: a claim whose expiry no partition covers fails, and"
            f" create_partitions() and purge() fail; inbox.create_schema() recreates {default}"
        )
    elif facts.default is None:
        faults.append(
            f"has no DEFAULT partition, and the table {default} is not attached as it:"
            f" ALTER TABLE {facts.parent} ATTACH PARTITION {default} DEFAULT"
        )
    elif not facts.default_is_expected:
        faults.append(
            f"has {facts.default} as its DEFAULT partition, but the inbox expects {default}"
            " (the purge expires rows there): detach it (ALTER TABLE"
            f" {facts.parent} DETACH PARTITION {facts.default}), run inbox.create_schema(),"
            f" then copy its rows back into {facts.parent}"
        )
    if facts.unindexed:
        names = ", ".join(part.sql for part in facts.unindexed)
        first = facts.unindexed[0].sql
        faults.append(
            f"has partitions without their unique index on (consumer, command_id), where a"
            f" command could be stored twice: {names}; inbox.create_partitions() creates"
            f" each missing index (or run CREATE UNIQUE INDEX ON {first} (consumer, command_id)"
            " for each)"
        )
    return faults


def batch_on_partitions_error() -> ConfigurationError:
    """The error for ``guard_batch()`` on a partitioned inbox: its one-statement
    claim relies on a unique index across the whole table, which a
    partitioned table cannot have."""
    msg = (
        "guard_batch() is not available on a partitioned inbox (Inbox(partitioning=...)):"
        " its one-statement claim needs (consumer, command_id) unique across the whole"
        " table. Nothing was claimed; guard each command with guard(), or drop partitioning"
    )
    return ConfigurationError(msg)


def _check_ahead(ahead: object) -> None:
    if isinstance(ahead, bool) or not isinstance(ahead, int) or ahead < 0:
        msg = f"create_partitions(ahead=...) must be a non-negative int (periods), got {ahead!r}"
        raise ConfigurationError(msg)
