"""The database every subcommand names the same way: ``--db URL`` or
``$INBOXGUARD_DB_URL``, opened with clear errors and never printed with its
secrets.

- A read command never creates a SQLite file: a path that does not exist
  is refused before SQLite would create it on connect.
- A URL whose driver is not installed (``postgresql://`` means psycopg2)
  gets a hint naming the driver the extras install.
"""

from __future__ import annotations

import argparse
import os
import re

from sqlalchemy import create_engine
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from inboxguard.cli._args import DB_ENV, database_url
from inboxguard.cli._output import UsageError

__all__ = ["DRIVER_HINTS", "ENV_VAR", "SECRET_KEYS", "missing_sqlite_file", "open_engine", "redact"]

#: Where ``--db`` is read from when it is not given.
ENV_VAR = DB_ENV

#: Query parameters whose values are secrets.
SECRET_KEYS = re.compile(r"pass|secret|token|key|auth|cred", re.IGNORECASE)

#: The URL each database takes with the drivers inboxguard's extras install.
DRIVER_HINTS = {
    "postgresql": ("postgresql+psycopg", "inboxguard[postgresql]"),
    "mysql": ("mysql+pymysql", "inboxguard[mysql]"),
    "mariadb": ("mysql+pymysql", "inboxguard[mysql]"),
}


def redact(url: str | URL) -> str:
    """``url`` with its password and secret-looking query values masked."""
    try:
        parsed = make_url(url) if isinstance(url, str) else url
    except ArgumentError:
        return "<unparsable URL>"
    query = {k: ("REDACTED" if SECRET_KEYS.search(k) else v) for k, v in parsed.query.items()}
    return parsed.set(query=query).render_as_string(hide_password=True)


def open_engine(
    args: argparse.Namespace, *, read_only: bool, connect_timeout: float | None = None
) -> Engine:
    """The engine of ``args.db`` (``--db`` or ``$INBOXGUARD_DB_URL``); with
    ``connect_timeout`` (seconds), a server that does not answer fails the
    connection (and, on MariaDB/MySQL, any read) after that long instead of
    hanging.

    Raises:
        UsageError: no URL, an unparsable one, an unknown database, a
            driver that is not installed (with the one to use), or, for a
            read command, a SQLite file that does not exist.
    """
    raw = database_url(args)
    if not raw:
        msg = f"--db is required (or set {ENV_VAR}): the SQLAlchemy URL of the database"
        raise UsageError(msg)
    try:
        url = make_url(raw)
    except ArgumentError as error:
        msg = f"--db is not a SQLAlchemy URL ({error}); e.g. postgresql+psycopg://user@host/db"
        raise UsageError(msg) from None
    shown = redact(url)
    if read_only and url.get_backend_name() == "sqlite":
        _refuse_missing_sqlite_file(url, shown)
    try:
        return create_engine(url, connect_args=_timeouts(url, connect_timeout))
    except NoSuchModuleError:
        msg = f"--db {shown}: no SQLAlchemy dialect named {url.drivername!r}"
        raise UsageError(msg) from None
    except ImportError as error:
        raise UsageError(_driver_hint(url, shown, error)) from None
    except ArgumentError as error:
        raise UsageError(f"--db {shown} is not usable: {error}") from None


def _timeouts(url: URL, seconds: float | None) -> dict[str, object]:
    """The driver's arguments that bound a connection attempt to ``seconds``."""
    if seconds is None:
        return {}
    backend, driver = url.get_backend_name(), url.get_driver_name()
    if backend == "postgresql" and driver in ("psycopg", "psycopg2"):
        return {"connect_timeout": max(1, round(seconds))}  # libpq takes whole seconds
    if backend in ("mysql", "mariadb") and driver == "pymysql":
        # pymysql's connect_timeout covers the TCP connect only; the server's
        # greeting is a read, bounded by read_timeout.
        return {"connect_timeout": seconds, "read_timeout": seconds}
    return {}


def _refuse_missing_sqlite_file(url: URL, shown: str) -> None:
    missing = missing_sqlite_file(url)
    if missing is not None:
        msg = f"--db {shown}: no SQLite database at {missing} (a read command never creates one)"
        raise UsageError(f"{msg}; check the path")


def missing_sqlite_file(url: URL) -> str | None:
    """The absolute path of ``url``'s SQLite file when it does not exist (a
    connection would create it), else None (not SQLite, in memory, a URI)."""
    if url.get_backend_name() != "sqlite":
        return None
    path = url.database or ""
    in_memory = path in {"", ":memory:"} or path.startswith("file::memory:")
    if in_memory or url.query.get("uri") or path.startswith("file:"):
        return None
    return None if os.path.exists(path) else os.path.abspath(path)


def _driver_hint(url: URL, shown: str, error: ImportError) -> str:
    missing = error.name or str(error)
    hint = DRIVER_HINTS.get(url.get_backend_name())
    if hint is None:
        return f"--db {shown}: its driver {missing!r} is not installed"
    driver, extra = hint
    rest = str(url.set(drivername=driver).render_as_string(hide_password=True))
    return (
        f"--db {shown}: its driver {missing!r} is not installed; use the driver"
        f" {extra} installs: {driver}:// (e.g. {rest}), or pip install {missing}"
    )
