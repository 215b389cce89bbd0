"""The driver connection's own ``commit()``, refused while a guarded block runs.

SQLAlchemy's events see ``session.commit()`` and ``connection.commit()``, and
its statement events see a ``COMMIT`` statement, but a handler can still
reach the DBAPI connection (``conn.connection.dbapi_connection.commit()``).
:func:`refuse_driver_commit` makes that call fail before the driver sends
anything:

- a driver connection whose ``commit`` can be replaced on the instance
  (psycopg, PyMySQL) gets a ``commit`` that raises, removed again afterwards;
- one whose class has ``__slots__`` (SQLAlchemy's asyncio adapters for
  asyncpg and aiosqlite) is switched, for the block, to a subclass of its own
  class whose ``commit`` raises, and switched back afterwards;
- the stdlib ``sqlite3`` connection, a C type, gets an authorizer that denies
  the ``COMMIT`` it prepares, so ``commit()`` fails with "not authorized"
  (an application's own authorizer is replaced while the block runs: sqlite3
  offers no way to read it back).

Either way ``refused`` is called first, so the guard remembers the attempt.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from typing import Any

__all__ = ["refuse_driver_commit"]


def refuse_driver_commit(dbapi: Any, refused: Callable[[str], None]) -> Callable[[], None]:
    """Refuse ``dbapi.commit()`` until the returned function is called;
    ``refused(route)`` runs on each attempt (and may raise)."""
    if dbapi is None:
        return _nothing

    def commit() -> None:
        refused("the driver connection's commit()")

    try:
        dbapi.commit = commit
    except (AttributeError, TypeError):
        pass
    else:
        return lambda: _restore(dbapi)
    if isinstance(dbapi, sqlite3.Connection):
        return _authorize(dbapi, refused)
    return _swap_class(dbapi, refused)


#: The refusal of each connection whose class is switched, by id (slotted
#: objects take no weak reference); removed when the class is switched back.
_REFUSALS: dict[int, Callable[[str], None]] = {}
_REFUSING: dict[type, type] = {}


def _swap_class(dbapi: Any, refused: Callable[[str], None]) -> Callable[[], None]:
    original = type(dbapi)
    refusing = _REFUSING.get(original)
    if refusing is None:

        def commit(self: Any) -> None:
            _REFUSALS[id(self)]("the driver connection's commit()")

        refusing = type(
            f"Refusing{original.__name__}", (original,), {"__slots__": (), "commit": commit}
        )
        _REFUSING[original] = refusing
    try:
        dbapi.__class__ = refusing
    except TypeError:  # a class whose instances cannot change class: left alone
        return _nothing
    _REFUSALS[id(dbapi)] = refused

    def restore() -> None:
        dbapi.__class__ = original
        _REFUSALS.pop(id(dbapi), None)

    return restore


def _restore(dbapi: Any) -> None:
    with contextlib.suppress(AttributeError):
        del dbapi.commit


def _authorize(dbapi: sqlite3.Connection, refused: Callable[[str], None]) -> Callable[[], None]:
    def authorizer(action: int, arg1: str | None, *_: object) -> int:
        if action == sqlite3.SQLITE_TRANSACTION and arg1 == "COMMIT":
            with contextlib.suppress(Exception):  # sqlite3 cannot carry it: deny instead
                refused("the driver connection's commit()")
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    dbapi.set_authorizer(authorizer)
    return lambda: dbapi.set_authorizer(None)


def _nothing() -> None:
    return None
