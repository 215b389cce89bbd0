"""What every database provides, and the record that names one database's
statements.

A database plugs in with one folder beside this one (``inbox``, ``outbox``
and ``purge`` modules, and a :class:`Database` record in its ``__init__``)
and one line in the registry, :mod:`inboxguard.sql.dialects`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.engine import Dialect as SaDialect

from inboxguard.sql.dialects.base.batch import BatchStatements
from inboxguard.sql.dialects.base.boundary import ends_transaction
from inboxguard.sql.dialects.base.inbox import InboxStatements, Watermark
from inboxguard.sql.dialects.base.outbox import OutboxStatements
from inboxguard.sql.dialects.base.purge import PurgeStatements

__all__ = ["Database"]


@dataclass(frozen=True, slots=True)
class Database:
    """One supported database: the SQLAlchemy dialect names it serves and the
    classes holding every statement inboxguard runs on it.

    Capability flags are class attributes of the statement classes (for
    instance :attr:`OutboxStatements.concurrent_dispatchers`,
    :attr:`PurgeStatements.single_purger`), and this record's own
    (:attr:`supports_partitioning`); the services read them instead of testing
    the database's name.
    """

    #: How messages name the database.
    label: str
    #: SQLAlchemy dialect names (``Dialect.name`` of SQLAlchemy) this database serves.
    names: tuple[str, ...]
    #: The inbox: claim, result store, quarantine upsert.
    inbox: type[InboxStatements]
    #: The advance of a domain watermark.
    watermark: type[Watermark]
    #: The purge: single-purger lock and one batch of each step.
    purge: type[PurgeStatements]
    #: The outbox: add, claim for dispatch, outcome records, compaction.
    outbox: type[OutboxStatements]
    #: The batch claim and result store of ``Inbox.guard_batch()``.
    batch: type[BatchStatements]
    #: Refuses a connected SQLAlchemy dialect whose connections cannot keep the
    #: guarantees (MariaDB/MySQL: a character set other than utf8mb4).
    check: Callable[[SaDialect], None] = lambda sa_dialect: None
    #: The inbox on a table partitioned by expiry (``Inbox(partitioning=...)``);
    #: None where the database has no such layout.
    partitioned_inbox: type[InboxStatements] | None = None
    #: True for a statement that would commit or end the transaction, told
    #: before it runs (the guarded block refuses it): ``COMMIT``, ``END``,
    #: ``ROLLBACK``, and on MariaDB/MySQL every implicitly committing statement.
    ends_transaction: Callable[[str], bool] = ends_transaction

    @property
    def supports_partitioning(self) -> bool:
        """Whether an inbox table partitioned by expiry can live here."""
        return self.partitioned_inbox is not None
