"""Which SQLite database an engine writes to, whatever its URL looks like.

SQLite has one writer per database file, so the outbox's one-dispatcher lock
and the ledger's refusal to write inside a guard on the same file both need
to know when two engines share a database; a URL string does not tell
(symlinks, ``file:`` URIs, in-memory databases).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from sqlalchemy.engine import Engine

__all__ = ["database_key", "journal_mode", "same_database"]


def database_key(engine: Engine) -> tuple[str, str]:
    """``("file", real path)`` or ``("memory", name)`` of a SQLite engine's database.

    A file is named by its real path (symlinks resolved), also when the URL
    gives it as a ``file:`` URI with ``uri=true``. A named shared-cache
    in-memory database (``file:name?mode=memory&cache=shared``) is named by
    its name; an anonymous one (``sqlite://``, ``:memory:``) is private to
    its engine, so it is named by the engine.
    """
    url = engine.url
    database = url.database or ""
    if str(url.query.get("uri", "")).lower() in ("true", "1") and database.startswith("file:"):
        parts = urlsplit(database)
        query = parse_qs(parts.query) | {k: [str(v)] for k, v in url.query.items()}
        path = unquote(parts.path)
        if query.get("mode") == ["memory"] or path in ("", ":memory:"):
            return ("memory", path or f"engine-{id(engine)}")
        database = path
    if database in ("", ":memory:"):
        return ("memory", f"engine-{id(engine)}")
    return ("file", os.path.realpath(database))


def same_database(one: Engine, other: Engine) -> bool:
    """True when both engines write to one SQLite database (False for any
    other database, whose writers do not exclude each other)."""
    if one.dialect.name != "sqlite" or other.dialect.name != "sqlite":
        return False
    return one is other or database_key(one) == database_key(other)


def journal_mode(cursor: Any) -> str:
    """The journal mode (``"wal"``, ``"delete"``, ...) of the SQLite database a
    DBAPI cursor (or a Django cursor) is on."""
    cursor.execute("PRAGMA journal_mode")
    return str(cursor.fetchone()[0]).lower()
