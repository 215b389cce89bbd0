"""What a watched guarded block refuses, and the listeners that see it.

While a :class:`~inboxguard.sql.boundary.Boundary` watches the caller's
block, every commit is refused before it runs: ``session.commit()`` (the
session's ``before_commit`` event), ``connection.commit()`` (the connection's
``commit`` event), and any statement the database says would end the
transaction, or that releases or rolls back the guard's own savepoint (seen
in ``before_cursor_execute``). :class:`Refusals` is the part of the boundary
that decides and raises; :func:`listen_once` registers the listeners once per
engine (and once on the ``Session`` class), and they dispatch only for the
connection a boundary watches (:data:`WATCHED`).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, Engine, event
from sqlalchemy.orm import Session, SessionTransaction
from sqlalchemy.sql.expression import (
    ReleaseSavepointClause,
    RollbackToSavepointClause,
    SavepointClause,
)

from inboxguard.errors import ConfigurationError
from inboxguard.sql.connection import driver_left_transaction
from inboxguard.sql.dialects.base.boundary import leading_words

__all__ = ["SESSION_KEY", "WATCHED", "Refusals", "listen_once"]

_SAVEPOINT_CLAUSES = (SavepointClause, ReleaseSavepointClause, RollbackToSavepointClause)


class Refusals:
    """The refusals of one watched block: each attempt to end its transaction
    raises ``ConfigurationError`` and is remembered in :attr:`refused`. The
    boundary sets them: the label naming the command, the savepoint's name,
    the database's reading of a statement, and whether it is watching."""

    __slots__ = ("_ends", "_label", "_name", "_session_tx", "_watching", "refused")

    #: How the block tried to end the transaction, once refused (else None).
    refused: str | None
    _label: str
    _name: str | None
    _ends: Callable[[str], bool]
    _session_tx: SessionTransaction | None
    _watching: bool

    def _refuse(self, route: str) -> None:
        self.refused = route
        msg = (
            f"inboxguard refused {route} inside the guarded block of {self._label}: it"
            " would commit the claim with only part of the block, so the command could be"
            " lost. Never commit inside the block: the caller commits after it (a step that"
            " may fail goes in a savepoint, begin_nested()). Nothing of this block will commit"
        )
        raise ConfigurationError(msg)

    def _on_statement(
        self,
        conn: Connection,
        cursor: Any,
        statement: str,
        parameters: Any,
        context: Any,
        executemany: bool,
    ) -> None:
        compiled = getattr(context, "compiled", None)
        if compiled is not None and isinstance(compiled.statement, _SAVEPOINT_CLAUSES):
            return  # SQLAlchemy's own savepoints (begin_nested) are allowed
        if self._ends(statement):
            self._refuse(f"the statement {statement.strip()[:60]!r}")
        if driver_left_transaction(conn):  # ended on the driver connection itself
            self._refuse(f"the statement {statement.strip()[:60]!r} after the transaction ended")
        if self._name is not None and _ends_savepoint(statement, self._name):
            self._refuse(f"the statement {statement.strip()[:60]!r} (the guard's savepoint)")

    def _on_commit(self, conn: Connection) -> None:
        # SQLAlchemy has already dropped its transaction when this event fires;
        # roll the database's back too, so both agree there is none.
        conn.dialect.do_rollback(conn.connection)
        self._refuse("connection.commit()")

    def _on_session_commit(self, session: Session) -> None:
        inner = session.get_nested_transaction()
        if inner is not None and inner is not self._session_tx:
            return  # the release of a savepoint the block opened
        self._refuse("session.commit()")


#: The boundary watching each connection during its block (nested guards stack).
WATCHED: weakref.WeakKeyDictionary[Connection, Refusals] = weakref.WeakKeyDictionary()
SESSION_KEY = "inboxguard.boundary"
_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()
_SESSIONS_LISTENED: list[bool] = []


def listen_once(conn: Connection) -> None:
    """Register the refusals on ``conn``'s engine (and the Session class) once."""
    if not _SESSIONS_LISTENED:
        event.listen(Session, "before_commit", _session_commit)
        _SESSIONS_LISTENED.append(True)
    engine = conn.engine
    while isinstance(getattr(engine, "_proxied", None), Engine):  # an OptionEngine
        engine = engine._proxied  # type: ignore[attr-defined]  # noqa: SLF001
    if engine in _ENGINES:
        return
    had = engine._has_events  # noqa: SLF001
    event.listen(engine, "before_cursor_execute", _statement)
    event.listen(engine, "commit", _commit)
    engine._has_events = had  # noqa: SLF001 - only watched connections dispatch
    _ENGINES.add(engine)


def _statement(
    conn: Connection, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
) -> None:
    boundary = WATCHED.get(conn)
    if boundary is not None and boundary._watching:  # noqa: SLF001
        boundary._on_statement(conn, cursor, statement, parameters, context, many)  # noqa: SLF001


def _commit(conn: Connection) -> None:
    boundary = WATCHED.get(conn)
    if boundary is not None and boundary._watching:  # noqa: SLF001
        boundary._on_commit(conn)  # noqa: SLF001


def _session_commit(session: Session) -> None:
    boundary = session.info.get(SESSION_KEY)
    if isinstance(boundary, Refusals) and boundary._watching:  # noqa: SLF001
        boundary._on_session_commit(session)  # noqa: SLF001


@functools.lru_cache(maxsize=2048)
def _ends_savepoint(statement: str, name: str) -> bool:
    """True for a written ``RELEASE`` or ``ROLLBACK TO`` of savepoint ``name``."""
    upper = name.upper()
    for words in leading_words(statement):
        if words[0] in {"RELEASE", "ROLLBACK"} and upper in words[1:]:
            return True
    return False
