"""Every per-database statement, one folder per database, and the one registry
that finds a database's statements for a SQLAlchemy dialect.

- :mod:`.base`: what every database provides (and the shapes two of them share);
- :mod:`.postgresql`, :mod:`.mysql` (MariaDB too), :mod:`.sqlite`: each holds
  the inbox's, the outbox's and the purge's statements of that database, and a
  :class:`Database` record naming them.

:func:`database_for` is the only place that maps a database to its
statements. A database it does not know is refused with
:class:`~inboxguard.errors.UnsupportedDialectError`; nothing falls back to
another database's SQL.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy.engine import Dialect as SaDialect

from inboxguard.errors import ConfigurationError, UnsupportedDialectError
from inboxguard.sql.dialects import mysql, postgresql, sqlite
from inboxguard.sql.dialects.base import Database
from inboxguard.sql.dialects.base.batch import BatchStatements
from inboxguard.sql.dialects.base.inbox import (
    Claim,
    ClaimSteps,
    InboxStatements,
    Step,
    Steps,
    Watermark,
    drive,
)
from inboxguard.sql.dialects.base.outbox import OutboxStatements
from inboxguard.sql.dialects.base.purge import PurgeStatements
from inboxguard.sql.tables import InboxTables

__all__ = [
    "DATABASES",
    "BatchStatements",
    "Claim",
    "ClaimSteps",
    "Database",
    "InboxStatements",
    "OutboxStatements",
    "PurgeStatements",
    "Step",
    "Steps",
    "Watermark",
    "batch_for",
    "database_for",
    "drive",
    "inbox_statements_for",
    "partitioning_unsupported",
]

#: The supported databases; a new one is one more entry here.
DATABASES: tuple[Database, ...] = (postgresql.DATABASE, mysql.DATABASE, sqlite.DATABASE)

_BY_NAME = {name: database for database in DATABASES for name in database.names}


def database_for(sa_dialect: SaDialect) -> Database:
    """Return the statements of the database behind a SQLAlchemy dialect.

    A connected dialect is checked first (:attr:`Database.check`).

    Raises:
        UnsupportedDialectError: no supported database serves ``sa_dialect``.
        ConfigurationError: its connections cannot keep the guarantees (on
            MariaDB/MySQL, a character set other than utf8mb4).
    """
    found = _BY_NAME.get(sa_dialect.name)
    if found is None:
        supported = ", ".join(database.label for database in DATABASES)
        msg = (
            f"database {sa_dialect.name!r} is not supported; inboxguard runs on {supported}:"
            " use an engine on one of them"
        )
        raise UnsupportedDialectError(msg)
    found.check(sa_dialect)
    return found


def inbox_statements_for(
    sa_dialect: SaDialect,
    tables: InboxTables,
    lock_timeout: dt.timedelta | None,
    *,
    partitioned: bool = False,
) -> InboxStatements:
    """Return the inbox's statements for a SQLAlchemy dialect (``partitioned``:
    for an inbox table partitioned by expiry).

    Raises:
        UnsupportedDialectError: no supported database serves ``sa_dialect``.
        ConfigurationError: ``partitioned`` on a database without partitioning.
    """
    database = database_for(sa_dialect)
    if not partitioned:
        return database.inbox.for_dialect(sa_dialect, tables, lock_timeout)
    if database.partitioned_inbox is None:
        raise partitioning_unsupported(database.label)
    return database.partitioned_inbox.for_dialect(sa_dialect, tables, lock_timeout)


def partitioning_unsupported(label: str) -> ConfigurationError:
    """The error for ``Inbox(partitioning=...)`` on a database without it."""
    msg = (
        f"partitioning is supported on PostgreSQL only, not on {label}: remove"
        " partitioning=... from Inbox(...) (the purge deletes expired rows in batches there)"
    )
    return ConfigurationError(msg)


def batch_for(
    sa_dialect: SaDialect, tables: InboxTables, lock_timeout: dt.timedelta | None
) -> BatchStatements:
    """Return the batch claim's statements for a SQLAlchemy dialect.

    Raises:
        UnsupportedDialectError: no supported database serves ``sa_dialect``.
    """
    return database_for(sa_dialect).batch.for_dialect(sa_dialect, tables, lock_timeout)
