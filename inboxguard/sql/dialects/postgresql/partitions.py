"""PostgreSQL range partitioning of the evidence by ``expires_at``.

Features:

- layout: the ``inbox`` table is ``PARTITION BY RANGE (expires_at)``; one
  partition per period (``daily``, ``weekly`` from Monday, ``monthly``), named
  ``<inbox>_pYYYYMMDD`` after the first day of its period, and a ``DEFAULT``
  partition (``<inbox>_default``) that catches any expiry no partition covers,
  so a claim never fails for want of a partition.
- uniqueness: PostgreSQL cannot put a unique index on ``(consumer,
  command_id)`` across partitions (the key would have to include
  ``expires_at``). Each partition has its own unique index; across
  partitions the claim takes a transaction-scoped advisory lock on the
  command first (see :mod:`.partitioned`). ``check_schema()`` refuses a
  partition without its index (one attached by hand, or restored without
  indexes; see :mod:`.partition_catalog`), and ``create_partitions()``
  creates each missing one.
- create ahead: one short transaction per partition; rows the DEFAULT
  partition caught in the new range are moved into it in the same
  transaction, so the attach never fails on them.
- never a stall: every DDL lock is asked for under a short ``lock_timeout``
  (:data:`DDL_LOCK_TIMEOUT`), because claims arriving while an ``ACCESS
  EXCLUSIVE`` request waits (behind a long transaction) queue behind it. The
  first lock not had in time ends that maintenance step: the partitions left
  are created, or dropped, by the next call, and claims wait once, briefly.
- purge: a partition whose whole range is at or before ``now`` is detached
  and dropped in one transaction under a short ``lock_timeout``; the
  detached table is checked first (no row after ``now``, no row an open
  quarantine record names) and the transaction rolls back, keeping the
  partition, when either check fails. ``DETACH CONCURRENTLY`` is not used: it
  cannot run while a DEFAULT partition exists, nor inside a transaction.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import re
from dataclasses import dataclass

from sqlalchemy import Column, Connection, Index, MetaData, Table, text
from sqlalchemy.exc import DBAPIError, IntegrityError

from inboxguard.errors import ConfigurationError
from inboxguard.sql.dialects.postgresql.partition_catalog import LayoutFacts, read_layout
from inboxguard.sql.dialects.postgresql.partition_periods import (
    Granularity,
    next_period,
    period_start,
)
from inboxguard.sql.errors import is_busy
from inboxguard.sql.table_text import translated_schema
from inboxguard.sql.tables import InboxTables

__all__ = ["DropOutcome", "PartitionLayout", "claim_lock_seed"]

logger = logging.getLogger("inboxguard")

#: How long the purge's and the creation's DDL wait for a lock before giving
#: up (the next maintenance call tries again): claims that arrive meanwhile
#: queue behind the waiting request, at most this long, once per call.
DDL_LOCK_TIMEOUT = dt.timedelta(milliseconds=100)


def claim_lock_seed(inbox_name: str) -> int:
    """The seed of the claim's advisory-lock keys: one key space per inbox table."""
    digest = hashlib.sha256(f"inboxguard:claim:{inbox_name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@dataclass(frozen=True, slots=True)
class DropOutcome:
    """What one purge did to the partitions: dropped ones, and fully expired
    ones kept because a row in them is named by an open quarantine record
    (or is not expired after all)."""

    dropped: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()


class PartitionLayout:
    """The partitions of one prefix's inbox table on PostgreSQL."""

    def __init__(self, tables: InboxTables, granularity: Granularity) -> None:
        self.tables = tables
        self.granularity = granularity
        self.name = tables.inbox.name
        self.default_name = f"{self.name}_default"
        self.parent = _partitioned_parent(tables.inbox)
        #: The DEFAULT partition as a Table (the purge deletes its expired rows one by one).
        self.default = tables.inbox.to_metadata(MetaData(), name=self.default_name)

    def partition_name(self, start: dt.datetime) -> str:
        """``<inbox>_pYYYYMMDD``, after the first day of the period."""
        return f"{self.name}_p{start:%Y%m%d}"

    # -- schema -------------------------------------------------------------------------

    def create(self, conn: Connection, now: dt.datetime, last: dt.datetime) -> list[str]:
        """Create the partitioned table and its DEFAULT partition if absent,
        then the partitions up to ``last`` (:meth:`create_ahead`)."""
        self.parent.metadata.create_all(conn, tables=[self.parent])
        default = self._q(conn, self.default_name)
        conn.execute(
            text(f"CREATE TABLE IF NOT EXISTS {default} PARTITION OF {self._parent(conn)} DEFAULT")
        )
        self._unique_index(conn, self.default_name)
        conn.commit()
        return self.create_ahead(conn, now, last)

    def is_partitioned(self, conn: Connection) -> bool | None:
        """True when the inbox table is partitioned, False when it is a plain
        table, None when it does not exist."""
        kind = conn.execute(
            text("SELECT relkind FROM pg_class WHERE oid = to_regclass(:name)"),
            {"name": self._parent(conn)},
        ).scalar()
        conn.rollback()
        return None if kind is None else kind == "p"

    def facts(self, conn: Connection) -> LayoutFacts | None:
        """The table's layout from the catalogs (None: it does not exist)."""
        return read_layout(conn, self._parent(conn), self._q(conn, self.default_name))

    def add_unique_indexes(self, conn: Connection) -> list[str]:
        """Create the unique (consumer, command_id) index of every attached
        partition lacking one, each in its own short transaction; return the
        partitions indexed (one whose lock was not had in time is left for
        the next call).

        Raises:
            ConfigurationError: a partition already holds a command twice.
        """
        facts = self.facts(conn)
        indexed: list[str] = []
        for part in () if facts is None else facts.unindexed:
            try:
                with conn.begin():
                    self._lock_timeout(conn)
                    self._unique_index(conn, part.name, on=part.sql, named=not part.key_name_taken)
            except IntegrityError as error:
                raise _duplicates_error(part.sql) from error
            except DBAPIError as error:
                if is_busy(error):
                    continue
                raise
            indexed.append(part.name)
        return indexed

    def horizon_end(self, now: dt.datetime, horizon: dt.timedelta, ahead: int) -> dt.datetime:
        """The start of the last period to exist: ``ahead`` periods past the
        one holding ``now + horizon`` (the expiry of a claim made now)."""
        end = period_start(now + horizon, self.granularity)
        for _ in range(ahead):
            end = next_period(end, self.granularity)
        return end

    def create_ahead(self, conn: Connection, now: dt.datetime, last: dt.datetime) -> list[str]:
        """Create every missing partition from the period of ``now`` to the
        one starting at ``last``; return the names created. The first
        partition whose lock is not had in time ends the call (the others
        would wait for the same lock): the next call creates the rest."""
        existing = set(self.partitions(conn))
        created: list[str] = []
        start = period_start(now, self.granularity)
        while start <= last:
            end = next_period(start, self.granularity)
            name = self.partition_name(start)
            if name not in existing:
                outcome = self._create_one(conn, name, start, end)
                if outcome is None:
                    _deferred("creating", name)
                    break
                if outcome:
                    created.append(name)
            start = end
        return created

    def partitions(self, conn: Connection) -> dict[str, dt.datetime]:
        """The existing period partitions, by name, with their start."""
        rows = conn.execute(
            text(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                " WHERE i.inhparent = to_regclass(:name)"
            ),
            {"name": self._parent(conn)},
        ).scalars()
        found: dict[str, dt.datetime] = {}
        pattern = re.compile(re.escape(self.name) + r"_p(\d{8})$")
        for relname in rows:
            match = pattern.match(relname)
            if match:
                found[relname] = dt.datetime.strptime(match.group(1), "%Y%m%d")
        conn.rollback()
        return dict(sorted(found.items(), key=lambda item: item[1]))

    def _create_one(
        self, conn: Connection, name: str, start: dt.datetime, end: dt.datetime
    ) -> bool | None:
        """One partition in one transaction: rows the DEFAULT partition caught
        in its range move into it before it is attached. False when another
        call created it meanwhile; None when a lock could not be had in time
        (the next maintenance call tries again)."""
        part, default = self._q(conn, name), self._q(conn, self.default_name)
        bounds = {"lo": start, "hi": end}
        within = "expires_at >= :lo AND expires_at < :hi"
        try:
            with conn.begin():
                self._lock_timeout(conn)
                conn.execute(text(f"LOCK TABLE {default} IN ACCESS EXCLUSIVE MODE"))
                # Another maintenance call may have created it while this one waited.
                taken = conn.execute(text("SELECT to_regclass(:p)"), {"p": part}).scalar()
                if taken is not None:
                    return False
                conn.execute(
                    text(f"CREATE TABLE {part} (LIKE {self._parent(conn)} INCLUDING DEFAULTS)")
                )
                self._unique_index(conn, name)
                conn.execute(
                    text(f"INSERT INTO {part} SELECT * FROM {default} WHERE {within}"), bounds
                )
                conn.execute(text(f"DELETE FROM {default} WHERE {within}"), bounds)
                conn.execute(
                    text(
                        f"ALTER TABLE {self._parent(conn)} ATTACH PARTITION {part}"
                        f" FOR VALUES FROM ('{start:%Y-%m-%d}') TO ('{end:%Y-%m-%d}')"
                    )
                )
        except DBAPIError as error:
            if is_busy(error):
                return None
            raise
        return True

    # -- purge --------------------------------------------------------------------------

    def drop_expired(self, conn: Connection, now: dt.datetime) -> DropOutcome:
        """Detach and drop every partition whose range ends at or before
        ``now``, unless it holds a row after ``now`` or a row an open
        quarantine record names (then it is kept, whole)."""
        naive_now = now.astimezone(dt.UTC).replace(tzinfo=None)
        dropped: list[str] = []
        kept: list[str] = []
        for name, start in self.partitions(conn).items():
            if next_period(start, self.granularity) > naive_now:
                break
            outcome = self._drop_one(conn, name, naive_now)
            if outcome is None:  # the next partition would wait for the same lock
                _deferred("dropping", name)
                break
            if outcome:
                dropped.append(name)
            else:
                kept.append(name)
        return DropOutcome(tuple(dropped), tuple(kept))

    def _drop_one(self, conn: Connection, name: str, now: dt.datetime) -> bool | None:
        """True: dropped; False: kept (unexpired or quarantined rows); None:
        a lock was not had in time (tried again next purge)."""
        part = self._q(conn, name)
        quarantine = self._q(conn, self.tables.quarantine.name)
        try:
            with conn.begin() as tx:
                self._lock_timeout(conn)
                conn.execute(text(f"ALTER TABLE {self._parent(conn)} DETACH PARTITION {part}"))
                # Quarantine writes wait for this short transaction: none can
                # name a row of the partition between the check and the drop.
                conn.execute(text(f"LOCK TABLE {quarantine} IN SHARE MODE"))
                if self._held(conn, part, quarantine, now):
                    tx.rollback()
                    return False
                conn.execute(text(f"DROP TABLE {part}"))
        except DBAPIError as error:
            if is_busy(error):
                return None
            raise
        return True

    def _held(self, conn: Connection, part: str, quarantine: str, now: dt.datetime) -> bool:
        unexpired = conn.execute(
            text(f"SELECT 1 FROM {part} WHERE expires_at > :now LIMIT 1"), {"now": now}
        ).first()
        named = conn.execute(
            text(
                f"SELECT 1 FROM {quarantine} q WHERE q.status = 'open' AND EXISTS"
                f" (SELECT 1 FROM {part} p WHERE p.consumer = q.consumer"
                " AND p.command_id = q.command_id) LIMIT 1"
            )
        ).first()
        return unexpired is not None or named is not None

    # -- names and settings -------------------------------------------------------------

    def _lock_timeout(self, conn: Connection) -> None:
        millis = int(DDL_LOCK_TIMEOUT.total_seconds() * 1000)
        conn.execute(text(f"SET LOCAL lock_timeout = {millis}"))

    def _unique_index(
        self, conn: Connection, table: str, *, on: str | None = None, named: bool = True
    ) -> None:
        """``<table>_key`` on ``table`` (``on``: its SQL name, when it may
        live outside the inbox's schema; ``named=False``: that name is taken
        by an index that does not qualify, so PostgreSQL picks one)."""
        target = self._q(conn, table) if on is None else on
        index = self._q(conn, f"{table}_key", schema=False)
        name = f"IF NOT EXISTS {index}" if named else ""
        conn.execute(text(f"CREATE UNIQUE INDEX {name} ON {target} (consumer, command_id)"))

    def _parent(self, conn: Connection) -> str:
        return self._q(conn, self.name)

    def _q(self, conn: Connection, name: str, *, schema: bool = True) -> str:
        """``name`` quoted, in the schema the inbox table lives in on ``conn``."""
        preparer = conn.dialect.identifier_preparer
        where = translated_schema(conn, self.tables.inbox) if schema else None
        quoted = preparer.quote(name)
        return quoted if where is None else f"{preparer.quote_schema(where)}.{quoted}"


def _deferred(doing: str, name: str) -> None:
    logger.warning(
        "partition maintenance deferred: %s %s needs a lock another transaction holds"
        " (not had within %d ms); the next create_partitions() or purge() tries again."
        " A transaction left open on the inbox (idle in transaction) delays it",
        doing,
        name,
        DDL_LOCK_TIMEOUT // dt.timedelta(milliseconds=1),
    )


def _duplicates_error(part: str) -> ConfigurationError:
    msg = (
        f"the partition {part} holds the same (consumer, command_id) more than once, so its"
        " unique index cannot be created: keep one row per command (e.g. SELECT consumer,"
        f" command_id FROM {part} GROUP BY 1, 2 HAVING count(*) > 1), then run"
        " inbox.create_partitions() again"
    )
    return ConfigurationError(msg)


def _partitioned_parent(inbox: Table) -> Table:
    """The inbox table's columns and non-unique indexes, partitioned by
    ``expires_at`` and without the primary key (which PostgreSQL would need
    to include ``expires_at``; each partition has a unique index instead)."""
    metadata = MetaData()
    columns = [Column(c.name, c.type, nullable=c.nullable) for c in inbox.columns]
    parent = Table(
        inbox.name,
        metadata,
        *columns,
        schema=inbox.schema,
        postgresql_partition_by="RANGE (expires_at)",
    )
    Index(f"ix_{inbox.name}_expires_at", parent.c.expires_at)
    has_ttl = parent.c.result_expires_at.is_not(None)
    Index(
        f"ix_{inbox.name}_result_expires_at",
        parent.c.result_expires_at,
        postgresql_where=has_ttl,
    )
    return parent
