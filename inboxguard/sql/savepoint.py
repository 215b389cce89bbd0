"""The guard's savepoint from the claim to the end of the caller's block: one
home for when it opens, when it watches the block, and how it ends, for every
SQLAlchemy driver (the single guard's and the batch's, sync and asyncio).

:class:`GuardSavepoint` drives a :class:`~inboxguard.sql.boundary.Boundary`
through one guarded delivery:

1. opened on the caller's connection, at once (the single guard, after its
   session is checked) or, ``lazy``, before the first statement
   (:meth:`~GuardSavepoint.before_statement`): a batch that runs no statement
   (empty, or every entry refused) opens none and sends nothing;
2. :meth:`~GuardSavepoint.enter_block`: opened now if it was left for later
   (the stdlib SQLite driver outside a transaction), the caller's
   transaction marked, every commit refused while the block runs;
3. :meth:`~GuardSavepoint.exit_block`: the refusals stop, and whether the
   claim's transaction outlived the block is kept for the end;
4. :meth:`~GuardSavepoint.release` after a normal end, or
   :meth:`~GuardSavepoint.abandon` after an error or a cancellation.

The ``*_async`` methods do the same for an asyncio caller, the database work
inside ``run_sync``; watching and judging the block do no I/O and run as
they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Executable
from sqlalchemy.orm import Session

from inboxguard.sql.boundary import Boundary, open_boundary
from inboxguard.sql.connection import TransactionMark, transaction_kept, transaction_mark
from inboxguard.sql.direct import DirectSelect

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["GuardSavepoint"]


class GuardSavepoint:
    """The savepoint around one guarded claim and block on ``conn``, the
    caller's connection; ``session`` is the caller's ``Session`` (None for a
    Core connection). Built in sync code, or inside ``run_sync``; with
    ``lazy`` nothing is opened yet, and nothing runs on the connection."""

    __slots__ = ("_boundary", "_conn", "_mark", "_session", "kept")

    def __init__(self, session: Session | None, conn: Connection, *, lazy: bool = False) -> None:
        self._session = session
        self._conn = conn
        self._boundary: Boundary | None = None if lazy else open_boundary(session, conn)
        self._mark: TransactionMark | None = None
        #: The claim's transaction outlived the block (True until it ends).
        self.kept = True

    @staticmethod
    def orm(session: object) -> Session | None:
        """The caller's ``Session``, None for a Core connection."""
        return session if isinstance(session, Session) else None

    def before_statement(self) -> None:
        """Open the savepoint if it is not open yet (a lazy one)."""
        if self._boundary is None:
            self._boundary = open_boundary(self._session, self._conn)

    def enter_block(self, label: str) -> None:
        """The caller's block starts: open a savepoint left for later, mark the
        transaction, refuse every commit until :meth:`exit_block` (``label``
        names the command, or the batch, in the refusal)."""
        self._open_late()
        self._watch(label)

    def exit_block(self) -> bool:
        """The caller's block ended: stop refusing; return (and keep) whether
        the claim's transaction outlived it."""
        mark = self._mark
        if mark is None:
            msg = "exit_block() before enter_block()"
            raise RuntimeError(msg)
        boundary = self._boundary
        if boundary is None:
            self.kept = transaction_kept(mark)
            return self.kept
        self.kept = boundary.kept(mark)
        boundary.unwatch()
        return self.kept

    def release(self) -> None:
        """End a guard that ended normally (see :meth:`Boundary.release`)."""
        if self._boundary is not None:
            self._boundary.release()

    def keep_for_commit(
        self,
        statement: Executable,
        checked: DirectSelect,
        params: Mapping[str, Any],
        vanished: Callable[[int], Exception],
    ) -> bool:
        """Keep ``statement`` (run after the block, before :meth:`release`) back
        to be sent with the ``COMMIT`` as ``checked``, its variant that fails
        unless it changed one row; ``vanished(n)`` is the error when it changed
        ``n``. False (do nothing) where it cannot be (see
        :meth:`Boundary.keep_for_commit`)."""
        boundary = self._boundary
        return boundary is not None and boundary.keep_for_commit(
            statement, checked, params, vanished
        )

    def abandon(self) -> None:
        """End a guard that ended in an error or a cancellation: roll back to
        the savepoint, or the whole transaction when the block did not keep
        it (see :meth:`Boundary.abandon`)."""
        if self._boundary is not None:
            self._boundary.abandon(self.kept)

    # -- asyncio -----------------------------------------------------------------------

    async def before_statement_async(self, conn: AsyncConnection) -> None:
        """:meth:`before_statement` on the caller's ``AsyncConnection``."""
        if self._boundary is None:
            await conn.run_sync(lambda _: self.before_statement())

    async def enter_block_async(self, conn: AsyncConnection, label: str) -> None:
        """:meth:`enter_block` on the caller's ``AsyncConnection``."""
        if self._boundary is not None:
            await conn.run_sync(lambda _: self._open_late())
        self._watch(label)

    async def release_async(self, conn: AsyncConnection) -> None:
        """:meth:`release` on the caller's ``AsyncConnection``."""
        if self._boundary is not None:
            await conn.run_sync(lambda _: self.release())

    async def abandon_async(self, conn: AsyncConnection) -> None:
        """:meth:`abandon` on the caller's ``AsyncConnection``."""
        if self._boundary is not None:
            await conn.run_sync(lambda _: self.abandon())

    def _open_late(self) -> None:
        if self._boundary is not None:
            self._boundary.open_late()

    def _watch(self, label: str) -> None:
        self._mark = transaction_mark(self._conn)
        if self._boundary is not None:
            self._boundary.watch(label)
