"""SQLite purge statements.

Features:

- one purger across instances: no lock; SQLite has one writer at a time, so
  concurrent purges serialize on the database lock.
- each batch is one statement on rows addressed by ``rowid``:
  ``DELETE ... WHERE rowid IN (SELECT rowid ... LIMIT n)``.
"""

from __future__ import annotations

from inboxguard.sql.dialects.base.purge import PurgeStatements

__all__ = ["SqlitePurge"]


class SqlitePurge(PurgeStatements):
    """SQLite: the shared statements, rows addressed by ``rowid``."""

    address = "rowid"
