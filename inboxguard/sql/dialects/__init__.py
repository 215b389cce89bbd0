"""One module per supported database; :func:`dialect_for` picks one by name."""

from __future__ import annotations

import datetime as dt

from sqlalchemy.engine import Dialect as SaDialect

from inboxguard.errors import UnsupportedDialectError
from inboxguard.sql.dialects.base import Claim, ClaimSteps, Dialect, Step
from inboxguard.sql.schema import InboxTables

__all__ = ["Claim", "ClaimSteps", "Dialect", "Step", "dialect_for"]


def dialect_for(
    sa_dialect: SaDialect, tables: InboxTables, lock_timeout: dt.timedelta | None
) -> Dialect:
    """Return the inbox dialect for a SQLAlchemy dialect.

    Raises:
        UnsupportedDialectError: the database is not PostgreSQL, MariaDB/MySQL
            or SQLite.
    """
    name = sa_dialect.name
    if name == "postgresql":
        from inboxguard.sql.dialects.postgresql import PostgresqlDialect  # noqa: PLC0415

        return PostgresqlDialect(tables, lock_timeout)
    if name in {"mysql", "mariadb"}:
        from inboxguard.sql.dialects.mysql import MysqlDialect  # noqa: PLC0415

        is_mariadb = bool(getattr(sa_dialect, "is_mariadb", False))
        return MysqlDialect(tables, lock_timeout, is_mariadb=is_mariadb)
    if name == "sqlite":
        from inboxguard.sql.dialects.sqlite import SqliteDialect  # noqa: PLC0415

        return SqliteDialect(tables, lock_timeout)
    msg = (
        f"database {name!r} is not supported; inboxguard runs on PostgreSQL,"
        " MariaDB/MySQL and SQLite"
    )
    raise UnsupportedDialectError(msg)
