"""Every inboxguard table, as SQLAlchemy Core, on one MetaData per table prefix.

- the inbox's tables (:func:`inbox_tables`): ``inbox`` (the evidence),
  ``quarantine`` (refused messages), ``quarantine_replays`` (who re-published
  a refused message, when and why), ``quarantine_actions`` (who released or
  resolved a record, when and why) and ``watermark`` (one position per key);
- the outbox's table (:func:`outbox_tables`);
- the effect ledger's tables (:func:`effect_tables`): ``effects`` and its
  append-only ``effect_history``.

Each builder is cached per prefix, so a prefix always maps to the same
:class:`~sqlalchemy.schema.Table` objects, and refuses a prefix too long for
the names derived from it (:data:`MAX_PREFIX_LENGTH`). Every name is quoted
where the database needs it (``Ab_inbox`` on PostgreSQL), by Core and by the
SQL text of :mod:`inboxguard.sql.table_text` alike.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    UniqueConstraint,
    text,
)

from inboxguard._core.checks import IDENTIFIER_LIMIT, check_table_prefix
from inboxguard.sql.types import NAMING_CONVENTION, UtcDateTime, digest_type, id_type, long_text

__all__ = [
    "MAX_PREFIX_LENGTH",
    "EffectTables",
    "InboxTables",
    "OutboxTables",
    "check_prefix",
    "effect_tables",
    "inbox_tables",
    "outbox_tables",
]


@dataclass(frozen=True, slots=True)
class InboxTables:
    """The inbox tables of one prefix: ``inbox``, ``quarantine``,
    ``watermark``, ``quarantine_replays`` and ``quarantine_actions``."""

    metadata: MetaData
    inbox: Table
    quarantine: Table
    watermark: Table
    quarantine_replays: Table
    quarantine_actions: Table


@dataclass(frozen=True, slots=True)
class OutboxTables:
    """The outbox table of one prefix."""

    metadata: MetaData
    outbox: Table


@dataclass(frozen=True, slots=True)
class EffectTables:
    """The ledger tables of one prefix: ``effects`` and ``history``."""

    metadata: MetaData
    effects: Table
    history: Table


@functools.cache
def inbox_tables(prefix: str) -> InboxTables:
    """Return the (cached) inbox tables for ``prefix``; one MetaData per prefix.

    Raises:
        ConfigurationError: ``prefix`` is not a usable table prefix.
    """
    return _inbox_tables(check_prefix(prefix))


def _inbox_tables(prefix: str) -> InboxTables:
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    return InboxTables(
        metadata,
        _inbox(metadata, prefix),
        _quarantine(metadata, prefix),
        _watermark(metadata, prefix),
        _quarantine_replays(metadata, prefix),
        _quarantine_actions(metadata, prefix),
    )


def _inbox(metadata: MetaData, prefix: str) -> Table:
    """One evidence row per (consumer, command_id), kept until ``expires_at``."""
    inbox = Table(
        f"{prefix}inbox",
        metadata,
        Column("consumer", id_type(), nullable=False),
        Column("command_id", id_type(), nullable=False),
        Column("digest", digest_type(), nullable=False),
        Column("result", long_text(), nullable=True),
        Column("processed_at", UtcDateTime(), nullable=False),
        Column("expires_at", UtcDateTime(), nullable=False),
        Column("result_expires_at", UtcDateTime(), nullable=True),
        PrimaryKeyConstraint("consumer", "command_id"),
        Index(f"ix_{prefix}inbox_expires_at", "expires_at"),
    )
    # Purge's compaction step finds results past result_ttl through this index;
    # partial where the database allows, so inboxes without a result_ttl pay nothing.
    has_ttl = inbox.c.result_expires_at.is_not(None)
    Index(
        f"ix_{prefix}inbox_result_expires_at",
        inbox.c.result_expires_at,
        postgresql_where=has_ttl,
        sqlite_where=has_ttl,
    )
    return inbox


def _quarantine(metadata: MetaData, prefix: str) -> Table:
    """One record per refused (consumer, command_id, reason, incoming_digest)."""
    return Table(
        f"{prefix}quarantine",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("consumer", id_type(), nullable=False),
        Column("command_id", id_type(), nullable=False),
        Column("reason", String(64), nullable=False),
        Column("incoming_digest", digest_type(), nullable=False),
        Column("stored_digest", digest_type(), nullable=True),
        Column("first_seen_at", UtcDateTime(), nullable=False),
        Column("last_seen_at", UtcDateTime(), nullable=False),
        Column("occurrences", Integer, nullable=False),
        Column("status", String(16), nullable=False),
        Column("details", long_text(), nullable=True),
        UniqueConstraint(
            "consumer",
            "command_id",
            "reason",
            "incoming_digest",
            name=f"uq_{prefix}quarantine_identity",
        ),
        Index(f"ix_{prefix}quarantine_status", "status", "last_seen_at"),
    )


def _quarantine_replays(metadata: MetaData, prefix: str) -> Table:
    """One row per operator replay of a quarantine record, kept as an audit
    trail (a later refusal of the same message rewrites the record, not this)."""
    return Table(
        f"{prefix}quarantine_replays",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("quarantine_id", Integer, nullable=False),
        Column("consumer", id_type(), nullable=False),
        Column("command_id", id_type(), nullable=False),
        Column("destination", id_type(), nullable=False),
        Column("replayed_by", String(255), nullable=False),
        Column("reason", long_text(), nullable=False),
        Column("replayed_at", UtcDateTime(), nullable=False),
        Column("receipt", long_text(), nullable=True),
        Index(f"ix_{prefix}quarantine_replays_qid", "quarantine_id", "id"),
    )


def _quarantine_actions(metadata: MetaData, prefix: str) -> Table:
    """One row per operator release or resolution of a quarantine record (who,
    why, when), kept as an audit trail; a release also keeps the digest and
    time of the evidence it removed."""
    return Table(
        f"{prefix}quarantine_actions",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("quarantine_id", Integer, nullable=False),
        Column("consumer", id_type(), nullable=False),
        Column("command_id", id_type(), nullable=False),
        Column("action", String(16), nullable=False),
        Column("actor", String(255), nullable=False),
        Column("reason", long_text(), nullable=False),
        Column("acted_at", UtcDateTime(), nullable=False),
        Column("evidence_digest", digest_type(), nullable=True),
        Column("evidence_processed_at", UtcDateTime(), nullable=True),
        Index(f"ix_{prefix}quarantine_actions_qid", "quarantine_id", "id"),
    )


def _watermark(metadata: MetaData, prefix: str) -> Table:
    """One monotonic position per (consumer, key), kept forever."""
    return Table(
        f"{prefix}watermark",
        metadata,
        Column("consumer", id_type(), nullable=False),
        Column("key", id_type(), nullable=False),
        Column("position", BigInteger, nullable=False),
        Column("updated_at", UtcDateTime(), nullable=False),
        PrimaryKeyConstraint("consumer", "key"),
    )


@functools.cache
def outbox_tables(prefix: str) -> OutboxTables:
    """Return the (cached) outbox table for ``prefix``.

    One row per outgoing command. ``due_at`` drives polling: it holds the time
    the row may next be claimed while the row is pending (or leased), and is
    NULL once the row is delivered or dead. The polling index covers ``due_at``
    only, so it stays as small as the backlog (on PostgreSQL it is a partial
    index that leaves finished rows out altogether).

    Raises:
        ConfigurationError: ``prefix`` is not a usable table prefix.
    """
    return _outbox_tables(check_prefix(prefix))


def _outbox_tables(prefix: str) -> OutboxTables:
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    name = f"{prefix}outbox"
    outbox = Table(
        name,
        metadata,
        Column(
            "id",
            BigInteger().with_variant(Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        Column("command_id", id_type(), nullable=False),
        Column("destination", id_type(), nullable=False),
        # NULL once compacted: the identity and digest outlive the payload.
        Column("payload", long_text(), nullable=True),
        Column("headers", long_text(), nullable=True),
        Column("digest", digest_type(), nullable=False),
        Column("created_at", UtcDateTime(), nullable=False),
        # When the row may next be claimed; NULL when delivered or dead.
        Column("due_at", UtcDateTime(), nullable=True),
        Column("attempts", Integer, nullable=False, server_default=text("0")),
        Column("lease_token", String(32), nullable=True),
        Column("last_error", long_text(), nullable=True),
        Column("delivered_at", UtcDateTime(), nullable=True),
        Column("receipt", long_text(), nullable=True),
        Column("dead_at", UtcDateTime(), nullable=True),
        Column("compacted_at", UtcDateTime(), nullable=True),
        UniqueConstraint("command_id", name=f"uq_{name}_command_id"),
        Index(f"ix_{name}_due_at", "due_at", postgresql_where=text("due_at IS NOT NULL")),
        Index(f"ix_{name}_delivered_at", "delivered_at"),
        Index(f"ix_{name}_dead_at", "dead_at"),
    )
    return OutboxTables(metadata, outbox)


@functools.cache
def effect_tables(prefix: str) -> EffectTables:
    """Return the (cached) ledger tables for ``prefix``; one MetaData per prefix.

    The effects row carries the state, the payload digest, the receipt, a
    ``version`` bumped by every write and a ``fencing_token`` bumped by every
    lease acquisition; every write after the first is an UPDATE conditioned on
    the fencing token and the expected state, so a fenced-out worker changes
    nothing. The history table is only ever inserted into.

    Raises:
        ConfigurationError: ``prefix`` is not a usable table prefix.
    """
    return _effect_tables(check_prefix(prefix))


def _effect_tables(prefix: str) -> EffectTables:
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    return EffectTables(metadata, _effects(metadata, prefix), _history(metadata, prefix))


def _effects(metadata: MetaData, prefix: str) -> Table:
    """One row per effect: its state, lease, fencing token and receipt."""
    return Table(
        f"{prefix}effects",
        metadata,
        Column("effect_key", id_type(), nullable=False),
        Column("provider", String(255), nullable=False),
        Column("digest", digest_type(), nullable=False),
        Column("state", String(16), nullable=False),
        Column("version", Integer, nullable=False),
        Column("fencing_token", Integer, nullable=False),
        Column("lease_owner", String(255), nullable=True),
        Column("lease_expires_at", UtcDateTime(), nullable=True),
        Column("attempts", Integer, nullable=False),
        Column("applied", Boolean, nullable=True),
        Column("receipt_reference", String(255), nullable=True),
        Column("receipt_details", long_text(), nullable=True),
        Column("compensation_reference", String(255), nullable=True),
        Column("compensation_details", long_text(), nullable=True),
        Column("last_error", long_text(), nullable=True),
        Column("first_sent_at", UtcDateTime(), nullable=False),
        Column("created_at", UtcDateTime(), nullable=False),
        Column("updated_at", UtcDateTime(), nullable=False),
        PrimaryKeyConstraint("effect_key"),
        Index(f"ix_{prefix}effects_state", "state", "updated_at"),
    )


def _history(metadata: MetaData, prefix: str) -> Table:
    """Every transition of every effect, append-only."""
    return Table(
        f"{prefix}effect_history",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("effect_key", id_type(), nullable=False),
        Column("from_state", String(16), nullable=True),
        Column("to_state", String(16), nullable=False),
        Column("event", String(32), nullable=False),
        Column("version", Integer, nullable=False),
        Column("fencing_token", Integer, nullable=False),
        Column("actor", String(255), nullable=False),
        Column("at", UtcDateTime(), nullable=False),
        Column("note", long_text(), nullable=True),
        Index(f"ix_{prefix}effect_history_key", "effect_key", "id"),
    )


def _derived_names(metadata: MetaData) -> list[str]:
    """Every name the tables of ``metadata`` give the database: tables,
    indexes and constraints (after the naming convention)."""
    names: list[str] = []
    for table in metadata.tables.values():
        names.append(table.name)
        names.extend(str(index.name) for index in table.indexes)
        names.extend(str(c.name) for c in table.constraints if c.name is not None)
    return names


def _longest_suffix() -> int:
    """How many characters the longest derived name adds to the prefix."""
    probe = "p"
    built = (_inbox_tables(probe), _outbox_tables(probe), _effect_tables(probe))
    names = [name for tables in built for name in _derived_names(tables.metadata)]
    return max(len(name) for name in names) - len(probe)


#: The longest usable table prefix: the longest name derived from it (an
#: index or constraint name) must fit in IDENTIFIER_LIMIT characters.
MAX_PREFIX_LENGTH = IDENTIFIER_LIMIT - _longest_suffix()


def check_prefix(prefix: object) -> str:
    """:func:`~inboxguard._core.checks.check_table_prefix` with the bound of
    the names these tables derive from a prefix (:data:`MAX_PREFIX_LENGTH`).

    Raises:
        ConfigurationError: ``prefix`` is unusable or too long.
    """
    return check_table_prefix(prefix, max_length=MAX_PREFIX_LENGTH)
