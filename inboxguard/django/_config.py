"""``settings.INBOXGUARD``, read and checked in one place, and the SQLAlchemy
engine the Django store's own transactions run on.

``INBOXGUARD = {"RETENTION": timedelta(...), "TABLE_PREFIX": "inboxguard_",
"DATABASE": "default"}``: ``RETENTION`` (a ``timedelta`` or a
:class:`~inboxguard.RetentionPolicy`) is required, the others have those
defaults. Any other key is refused, so a misspelling cannot pass silently.

The guard runs on Django's own connection; what runs in transactions of its
own (quarantine records, purge, the outbox dispatcher, operators' reads) goes
through a SQLAlchemy engine on the same database, built from the alias's
``DATABASES`` entry by :func:`engine_for`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import URL, create_engine
from sqlalchemy.engine import Engine

from inboxguard._core.retention import RetentionPolicy
from inboxguard.errors import ConfigurationError

__all__ = ["DEFAULT_PREFIX", "StoreSettings", "engine_for", "store_settings"]

DEFAULT_PREFIX = "inboxguard_"
_KEYS = ("RETENTION", "TABLE_PREFIX", "DATABASE")
#: PostgreSQL ``OPTIONS`` that Django reads itself; the rest are libpq parameters.
_DJANGO_PG_OPTIONS = frozenset({"isolation_level", "server_side_binding", "assume_role", "pool"})
#: MariaDB/MySQL ``OPTIONS`` passed on to the driver's ``connect()``.
_MYSQL_OPTIONS = frozenset({"charset", "unix_socket", "read_default_file", "ssl"})


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """The checked ``settings.INBOXGUARD``."""

    retention: RetentionPolicy | None
    table_prefix: str
    database: str


def store_settings(*, require_retention: bool = True) -> StoreSettings:
    """Read ``settings.INBOXGUARD``.

    Raises:
        ConfigurationError: it is not a dict, has an unknown key, lacks
            ``RETENTION`` (when required), or names a database alias that
            ``DATABASES`` does not have.
    """
    from django.conf import settings

    raw = getattr(settings, "INBOXGUARD", None)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        msg = f"settings.INBOXGUARD must be a dict, got {type(raw).__name__}"
        raise ConfigurationError(msg)
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        msg = f"settings.INBOXGUARD has unknown key(s) {unknown}; the keys are {', '.join(_KEYS)}"
        raise ConfigurationError(msg)
    retention = raw.get("RETENTION")
    if retention is None and require_retention:
        msg = (
            "settings.INBOXGUARD['RETENTION'] is missing: set it to how long evidence is"
            " kept, longer than any redelivery or replay window, e.g."
            " INBOXGUARD = {'RETENTION': timedelta(days=7)}"
        )
        raise ConfigurationError(msg)
    database = raw.get("DATABASE", "default")
    check_alias(database, "settings.INBOXGUARD['DATABASE']")
    return StoreSettings(
        RetentionPolicy.coerce(retention) if retention is not None else None,
        raw.get("TABLE_PREFIX", DEFAULT_PREFIX),
        database,
    )


def check_alias(alias: object, field: str) -> str:
    """Return ``alias`` if ``DATABASES`` has it.

    Raises:
        ConfigurationError: it is not a str or not a configured alias.
    """
    from django.db import connections

    names = list(connections.settings)
    if not isinstance(alias, str) or alias not in names:
        msg = f"{field} is {alias!r}, which is not a database alias of DATABASES {names}"
        raise ConfigurationError(msg)
    return alias


def engine_for(alias: str, **engine_options: Any) -> Engine:
    """A SQLAlchemy engine on the database of Django's ``alias``, built from
    its ``DATABASES`` entry as the connection uses it now (under Django's test
    runner: the test database).

    Raises:
        ConfigurationError: the backend is not PostgreSQL, MariaDB/MySQL or
            SQLite.
    """
    from django.db import connections

    connection = connections[alias]
    entry = connection.settings_dict
    options = dict(entry.get("OPTIONS") or {})
    module = getattr(connection.Database, "__name__", "")
    common: dict[str, Any] = {
        "username": entry.get("USER") or None,
        "password": entry.get("PASSWORD") or None,
        "host": entry.get("HOST") or None,
        "port": int(entry["PORT"]) if entry.get("PORT") else None,
        "database": entry.get("NAME") or None,
    }
    if connection.vendor == "postgresql":
        driver = "postgresql+psycopg2" if module.startswith("psycopg2") else "postgresql+psycopg"
        query = {
            k: str(v)
            for k, v in options.items()
            if k not in _DJANGO_PG_OPTIONS and isinstance(v, str | int)
        }
        url = URL.create(driver, **common, query=query)
    elif connection.vendor == "mysql":
        driver = "mysql+pymysql" if module.startswith("pymysql") else "mysql+mysqldb"
        query = {k: str(v) for k, v in options.items() if k in _MYSQL_OPTIONS and k != "ssl"}
        query.setdefault("charset", "utf8mb4")
        url = URL.create(driver, **common, query=query)
    elif connection.vendor == "sqlite":
        url = _sqlite_url(str(entry.get("NAME") or ":memory:"))
    else:
        msg = (
            f"Django database {alias!r} uses {entry.get('ENGINE')!r}; inboxguard runs on"
            " PostgreSQL, MariaDB/MySQL and SQLite"
        )
        raise ConfigurationError(msg)
    return create_engine(url, **engine_options)


def _sqlite_url(name: str) -> URL:
    """SQLite: a file, a ``file:`` URI (Django's shared in-memory test
    database), or ``:memory:`` (another database on every connection: its
    quarantine records cannot be written, and are logged)."""
    if name == ":memory:":
        return URL.create("sqlite")
    if name.startswith("file:"):
        return URL.create("sqlite", database=name, query={"uri": "true"})
    return URL.create("sqlite", database=name)


def coerce_retention(value: RetentionPolicy | dt.timedelta | None) -> RetentionPolicy:
    """The retention of a store: the argument, else ``settings.INBOXGUARD``."""
    if value is not None:
        return RetentionPolicy.coerce(value)
    found = store_settings().retention
    assert found is not None
    return found
