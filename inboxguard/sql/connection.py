"""The caller's transaction, checked in one place.

The services write their rows on the caller's own connection so that they
commit or roll back with the caller's changes. These functions take what the
caller passed (a SQLAlchemy ``Session`` or ``Connection``, or their asyncio
twins), return its connection, and refuse two mistakes with a message that
names the fix: an object of another kind, and a connection in ``AUTOCOMMIT``
mode (where each statement commits alone, so a service's row could commit
without the caller's changes).

The asyncio check imports ``sqlalchemy.ext.asyncio`` only when it is called,
so a sync-only program never loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Connection
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard.errors import ConfigurationError

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

__all__ = ["async_connection_of", "check_engine", "connection_of"]


def check_engine(engine: object, *, async_hint: str = "") -> Engine:
    """Return ``engine`` if it is a sync SQLAlchemy ``Engine``, else raise
    ConfigurationError; ``async_hint`` is added when an ``AsyncEngine`` was passed."""
    if not isinstance(engine, Engine):
        msg = f"engine must be a sqlalchemy Engine, got {type(engine).__name__}"
        if async_hint and hasattr(engine, "sync_engine"):
            msg += async_hint
        raise ConfigurationError(msg)
    return engine


def connection_of(session: Session | Connection, *, wrong_type: str, row: str) -> Connection:
    """Return the connection of a sync ``Session`` or ``Connection``.

    Args:
        session: what the caller passed.
        wrong_type: the refusal for any other object; ``{type}`` is replaced
            by its type's name.
        row: what could commit alone in AUTOCOMMIT mode, e.g. ``"the inbox
            row could commit without the handler's changes"``.

    Raises:
        ConfigurationError: ``session`` is of another kind, or its connection
            runs in AUTOCOMMIT mode.
    """
    if isinstance(session, Session):
        conn = session.connection()
    elif isinstance(session, Connection):
        conn = session
    else:
        raise ConfigurationError(wrong_type.format(type=type(session).__name__))
    _refuse_autocommit(conn, row)
    return conn


async def async_connection_of(
    session: AsyncSession | AsyncConnection, *, wrong_type: str, row: str
) -> AsyncConnection:
    """:func:`connection_of` for an ``AsyncSession`` or ``AsyncConnection``.

    An ``AsyncConnection`` that has not started yet is started.

    Raises:
        ConfigurationError: as :func:`connection_of`.
    """
    from sqlalchemy.ext.asyncio import (  # noqa: PLC0415 - only asyncio callers load it
        AsyncConnection,
        AsyncSession,
    )

    if isinstance(session, AsyncSession):
        conn = await session.connection()
    elif isinstance(session, AsyncConnection):
        conn = session
    else:
        raise ConfigurationError(wrong_type.format(type=type(session).__name__))
    if conn.sync_connection is None:
        conn = await conn.start()
    _refuse_autocommit(conn.sync_connection, row)  # type: ignore[arg-type]  # started above
    return conn


def _refuse_autocommit(conn: Connection, row: str) -> None:
    if conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
        msg = f"the connection runs in AUTOCOMMIT mode, so {row}; use a transactional connection"
        raise ConfigurationError(msg)
