"""The lock that keeps a SQLite database to one dispatcher, keyed on the
database itself rather than on how its URL is spelled."""

from __future__ import annotations

import os
import threading

from sqlalchemy.engine import Engine

from inboxguard.errors import ConfigurationError
from inboxguard.sql.dialects.sqlite.database import database_key

__all__ = ["SqliteDispatcherLock"]


class SqliteDispatcherLock:
    """An advisory lock that admits one dispatcher per SQLite database.

    A file database is locked with ``flock`` on ``<real path>.dispatcher.lock``,
    which also excludes dispatchers in other processes; an in-memory database
    is locked within this process.
    """

    _memory: set[str] = set()  # noqa: RUF012 - deliberately process-wide
    _guard = threading.Lock()

    def __init__(self, engine: Engine) -> None:
        self.kind, self.database = database_key(engine)
        self._fd: int | None = None
        self._held = False

    def acquire(self) -> None:
        """Take the lock or fail.

        Raises:
            ConfigurationError: another dispatcher holds it.
        """
        if self._held:
            return
        if self.kind == "memory":
            with self._guard:
                if self.database in self._memory:
                    raise self._busy()
                self._memory.add(self.database)
        else:
            import fcntl  # noqa: PLC0415 - POSIX only, and only for SQLite

            path = f"{self.database}.dispatcher.lock"
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:
                msg = (
                    f"the SQLite database's directory {os.path.dirname(path) or '.'} does not"
                    " exist; create it, or fix the database path"
                )
                raise ConfigurationError(msg) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise self._busy() from None
            self._fd = fd
        self._held = True

    def release(self) -> None:
        """Give the lock back (idempotent)."""
        if not self._held:
            return
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
        else:
            with self._guard:
                self._memory.discard(self.database)
        self._held = False

    def _busy(self) -> ConfigurationError:
        msg = (
            f"another outbox dispatcher is already running on the SQLite database"
            f" {self.database!r}; SQLite has no FOR UPDATE SKIP LOCKED, so it runs one"
            " dispatcher: stop the other one, or use PostgreSQL or MariaDB to run several"
        )
        return ConfigurationError(msg)
