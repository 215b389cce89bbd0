"""The caller's ``atomic()`` block on a Django connection, checked in one place.

Django commits each statement on its own outside ``transaction.atomic()``
(autocommit is its default), so a row the guard or the outbox writes there
would commit without the caller's changes. :func:`atomic_connection` refuses
that, and a block already marked for rollback (after an error inside it, or
``transaction.set_rollback(True)``), naming the fix. :func:`block_mark` and
:func:`block_kept` tell whether the block a row was written in is still the
open one, the way :func:`inboxguard.sql.connection.transaction_kept` does
for SQLAlchemy: a raw ``COMMIT`` or ``ROLLBACK`` on the cursor or the driver
connection, a closed connection, or a block now marked for rollback means the
row no longer commits with the block's changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inboxguard.errors import ConfigurationError

__all__ = ["BlockMark", "atomic_connection", "block_kept", "block_mark", "driver_in_transaction"]

#: psycopg's ``TransactionStatus`` INTRANS and INERROR: inside a transaction block.
_PG_IN_TRANSACTION = (2, 3)
#: MySQL's ``SERVER_STATUS_IN_TRANS`` bit of the server status flags.
_MYSQL_IN_TRANS = 1


def atomic_connection(alias: str, what: str) -> Any:
    """The Django connection of ``alias``, inside an ``atomic()`` block that
    can still commit.

    Args:
        alias: the database alias (``INBOXGUARD["DATABASE"]``).
        what: the call, for the message (``"inbox.guard()"``).

    Raises:
        ConfigurationError: outside ``transaction.atomic(using=alias)``, or in
            a block already marked for rollback.
    """
    from django.db import transaction

    connection = transaction.get_connection(alias)
    if not connection.in_atomic_block:
        msg = (
            f"{what} must run inside transaction.atomic(using={alias!r}): outside it"
            " Django commits each statement on its own (autocommit), so the row would"
            " commit without your changes; wrap the call:"
            f" `with transaction.atomic(using={alias!r}):`"
        )
        raise ConfigurationError(msg)
    if connection.needs_rollback or connection.closed_in_transaction:
        msg = (
            f"{what} was called in an atomic() block of {alias!r} that is already marked"
            " for rollback (a database error inside it, or transaction.set_rollback(True)):"
            " nothing written in it can commit. Let the block end, then start a new"
            " transaction.atomic(); wrap a step that may fail in its own nested atomic()"
        )
        raise ConfigurationError(msg)
    return connection


@dataclass(frozen=True, slots=True)
class BlockMark:
    """The caller's block as it was when a row was written in it."""

    connection: Any
    driver: Any
    blocks: tuple[Any, ...]
    savepoints: tuple[Any, ...]


def block_mark(connection: Any) -> BlockMark:
    """Mark the block ``connection`` is in now (after a statement ran in it)."""
    return BlockMark(
        connection,
        connection.connection,
        tuple(connection.atomic_blocks),
        tuple(connection.savepoint_ids),
    )


def block_kept(mark: BlockMark) -> bool:
    """True while the marked block is still open on its connection, can still
    commit, and its database transaction is the one the row was written in
    (atomic blocks opened after the mark may come and go)."""
    conn = mark.connection
    depth, sids = len(mark.blocks), len(mark.savepoints)
    return (
        conn.connection is mark.driver
        and conn.in_atomic_block
        and not conn.needs_rollback
        and not conn.closed_in_transaction
        and len(conn.atomic_blocks) >= depth
        and all(a is b for a, b in zip(conn.atomic_blocks[:depth], mark.blocks, strict=True))
        and tuple(conn.savepoint_ids[:sids]) == mark.savepoints
        and driver_in_transaction(mark.driver)
    )


def driver_in_transaction(driver: Any) -> bool:
    """True when the driver connection is inside a transaction (a raw COMMIT
    or ROLLBACK ends it); True when the driver cannot tell."""
    status = getattr(driver, "in_transaction", None)  # sqlite3
    if isinstance(status, bool):
        return status
    info = getattr(driver, "info", None)  # psycopg 3
    if info is not None and hasattr(info, "transaction_status"):
        return int(info.transaction_status) in _PG_IN_TRANSACTION
    probe = getattr(driver, "get_transaction_status", None)  # psycopg2
    if callable(probe):
        return int(probe()) in (1, 2, 3)  # INTRANS, INERROR, ... (not IDLE = 0)
    server_status = getattr(driver, "server_status", None)  # PyMySQL
    if isinstance(server_status, int):
        return bool(server_status & _MYSQL_IN_TRANS)
    return True
