"""The guarded block's edge on the caller's SQLAlchemy connection.

The guard owns the part of the caller's transaction that holds its claim:

- the claim and the block run inside a savepoint opened on the caller's
  ``Session`` (``begin_nested()``, so the ORM forgets what the block added
  when it rolls back) or ``Connection``. When the block exits by any
  exception or cancellation, the savepoint is rolled back: nothing the block
  did and no claim survives, even when the caller catches the error and
  commits;
- while the block runs, every commit is refused before it runs, by any
  route: ``session.commit()`` (the session's ``before_commit`` event),
  ``connection.commit()`` (the connection's ``commit`` event: SQLAlchemy has
  already forgotten the transaction when it fires, so the database's is
  rolled back too before the refusal, keeping the two in step), and any
  statement the database says would end the transaction (``COMMIT``,
  ``END``, MariaDB's implicitly committing DDL, seen in
  ``before_cursor_execute``). The refusal raises ``ConfigurationError`` in the
  block and is remembered: even a handler that catches it and carries on
  fails at the exit, and nothing of the block commits;
- at a normal exit the savepoint is released. ``RELEASE SAVEPOINT`` is the
  database's own word that the connection is still in the transaction that
  holds the claim: a savepoint lives only inside the transaction that made
  it, so after a commit, a rollback, or a transaction the server rolled back
  (a MariaDB deadlock) the release fails. Then, and whenever SQLAlchemy's
  own bookkeeping shows the transaction ended, the whole caller transaction
  is rolled back and ``ConfigurationError`` is raised: what the block wrote
  after the break never commits.

On SQLite through the stdlib driver, which only begins a transaction before
a data change, the guard emits ``BEGIN`` first when the driver is not yet in
one, so the savepoint nests in a transaction instead of becoming one that
its release would commit.

The refusals and their listeners live in :mod:`inboxguard.sql.refusals`; the
listeners are registered once per engine and dispatch only for a connection
while its block runs (the claim and the result store run without them, so
they may still take the direct path of :mod:`inboxguard.sql.direct`). On
psycopg (sync or asyncio) and asyncpg the savepoint's statements share round
trips with ``BEGIN`` and ``COMMIT``
(:mod:`inboxguard.sql.dialects.postgresql.trips`).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Executable
from sqlalchemy.engine import Dialect as SaDialect
from sqlalchemy.exc import DBAPIError, SAWarning, SQLAlchemyError
from sqlalchemy.orm import Session, SessionTransaction

from inboxguard.errors import ConfigurationError
from inboxguard.sql import direct
from inboxguard.sql.connection import TransactionMark, driver_transaction_aborted, transaction_kept
from inboxguard.sql.dialects import database_for
from inboxguard.sql.dialects.postgresql import trips
from inboxguard.sql.driver_commit import refuse_driver_commit
from inboxguard.sql.refusals import SESSION_KEY, WATCHED, Refusals, listen_once

if TYPE_CHECKING:
    from sqlalchemy.engine import NestedTransaction

__all__ = ["Boundary", "begin_driver_transaction", "open_boundary"]

_ENDS: dict[SaDialect, Callable[[str], bool]] = {}  # per dialect: its database's reading


def open_boundary(session: Session | None, conn: Connection) -> Boundary:
    """Open the savepoint the claim and the block run in, on the caller's
    ``session`` (None: the Core ``conn`` itself); sync code, or inside
    ``run_sync`` for an asyncio caller.

    On SQLite through the stdlib driver with nothing written yet (the
    session flushed first), the driver is outside any transaction: its reads
    take no lock, which keeps concurrent claims and quarantine records from
    waiting on this connection. The savepoint is then opened by
    :meth:`Boundary.open_late` when the block starts, after the claim began
    the driver's transaction (or after an explicit ``BEGIN``); everything in
    that transaction is the guard's, so an abandoned block rolls it all back.
    """
    if session is not None and conn.dialect.name == "sqlite":
        session.flush()  # the caller's pending changes decide whether a transaction is open
    ends = _ENDS.get(conn.dialect)
    if ends is None:
        # a handler sends the same few statement texts again and again: read each once
        ends = _ENDS[conn.dialect] = functools.lru_cache(maxsize=2048)(
            database_for(conn.dialect).ends_transaction
        )
    if begin_driver_transaction(conn):
        return Boundary(conn, session, None, ends)
    outermost = conn.get_nested_transaction() is None
    return Boundary(conn, session, _savepoint(session, conn), ends, outermost=outermost)


def _savepoint(session: Session | None, conn: Connection) -> NestedTransaction:
    """Begin a savepoint on the connection, a session's pending changes
    flushed first (so the savepoint holds only what the block does).

    A Core savepoint, not ``session.begin_nested()``: SQLAlchemy fires a
    session's ``before_commit`` and ``after_commit`` events when one of its
    nested transactions is released, so an application's "after commit" hook
    would run at the guard's release, before the real commit. What the
    session must forget when the savepoint is rolled back, :meth:`Boundary.abandon`
    tells it."""
    if session is not None:
        session.flush()
    if trips.shares_round_trips(conn):  # psycopg, asyncpg: it rides with the BEGIN
        trips.install(conn.dialect)
        with trips.armed(conn):
            return conn.begin_nested()
    return conn.begin_nested()


def begin_driver_transaction(conn: Connection) -> bool:
    """True when ``conn`` is on the stdlib ``sqlite3`` (or ``aiosqlite``)
    driver and that driver is outside a transaction of its own."""
    if conn.dialect.name != "sqlite":
        return False
    status = getattr(conn.connection.driver_connection, "in_transaction", None)
    return status is False


class Boundary(Refusals):
    """The savepoint around one guarded block and the refusals while it runs.

    Built by :func:`open_boundary` (``nested``: the session's or
    connection's nested transaction, None until :meth:`open_late`) and
    driven through one delivery by
    :class:`~inboxguard.sql.savepoint.GuardSavepoint`; :meth:`watch` and
    :meth:`unwatch` bracket the caller's block; :meth:`kept` says whether the
    claim's transaction outlived it.
    """

    __slots__ = (
        "_at_commit",
        "_conn",
        "_had_events",
        "_known",
        "_late",
        "_nested",
        "_outer",
        "_outer_session",
        "_outermost",
        "_session",
        "_shown_kept",
        "_stop_begins",
        "_undo_driver",
    )

    def __init__(
        self,
        conn: Connection,
        session: Session | None,
        nested: NestedTransaction | None,
        ends_transaction: Callable[[str], bool],
        *,
        outermost: bool = False,
    ) -> None:
        self._conn = conn
        #: No savepoint enclosed this one when it opened (its release may ride with the COMMIT).
        self._outermost = outermost
        self._session = session
        self._nested = nested
        self._session_tx: SessionTransaction | None = None
        #: The identities the session held when the savepoint opened.
        self._known = frozenset(session.identity_map.keys()) if session is not None else frozenset()
        inner = conn.get_nested_transaction() if nested is not None else None
        self._name: str | None = getattr(inner, "_savepoint", None)
        self._ends = ends_transaction
        self._label = "the command"
        self._watching = False
        self._had_events = True
        self._outer: Refusals | None = None
        self._outer_session: Refusals | None = None
        #: How the block tried to end the transaction, once refused (else None).
        self.refused: str | None = None
        self._late = False  # the savepoint opened after the claim: abandon rolls back all
        #: Stops watching the driver's begins (None: not watched); see :meth:`watch`.
        self._stop_begins: Callable[[], bool] | None = None
        #: The connection showed the claim's transaction open all through the block.
        self._shown_kept = False
        #: The result store kept back for the COMMIT (see :meth:`keep_for_commit`).
        self._at_commit: trips.KeptStore | None = None

    def watch(self, label: str) -> None:
        """Refuse every commit from now until :meth:`unwatch`; ``label`` names
        the command in the refusal.

        The listeners are registered once per engine (and once on the
        ``Session`` class) and stay silent for every connection but a watched
        one: SQLAlchemy dispatches a connection's statement and commit events
        only while its ``_has_events`` flag is set, which this sets for the
        block and puts back after it, so other connections keep their direct
        path and watching costs no listener registration per block.
        """
        conn = self._conn
        self._label = label
        if self._outermost and trips.shares_round_trips(conn):  # before the flag below is set
            self._stop_begins = trips.watch_begins(conn)
        listen_once(conn)
        self._had_events = bool(getattr(conn, "_has_events", True))
        self._outer = WATCHED.get(conn)
        WATCHED[conn] = self
        conn._has_events = True  # noqa: SLF001 - see above
        if self._session is not None:
            self._outer_session = self._session.info.get(SESSION_KEY)
            self._session.info[SESSION_KEY] = self
        self._undo_driver = refuse_driver_commit(conn.connection.dbapi_connection, self._refuse)
        self._watching = True

    def unwatch(self) -> None:
        """Stop refusing (before the guard's own release or rollback)."""
        if not self._watching:
            return
        self._watching = False
        conn = self._conn
        self._undo_driver()
        if self._stop_begins is not None:
            self._shown_kept = not self._stop_begins()
            self._stop_begins = None
        if self._outer is None:
            WATCHED.pop(conn, None)
        else:
            WATCHED[conn] = self._outer
        conn._has_events = self._had_events  # noqa: SLF001
        if self._session is not None:
            if self._outer_session is None:
                self._session.info.pop(SESSION_KEY, None)
            else:
                self._session.info[SESSION_KEY] = self._outer_session

    def kept(self, mark: TransactionMark) -> bool:
        """True when nothing was refused, SQLAlchemy's bookkeeping still shows
        the marked transaction, and the driver does not report it aborted by a
        statement that failed inside the block (the release then asks the
        database)."""
        nested = self._nested
        if nested is not None and (
            not nested.is_active or self._conn.get_nested_transaction() is not nested
        ):
            return False  # an enclosing savepoint was rolled back, and ours with it
        # A statement that failed inside the block, its error caught there,
        # aborted the transaction: neither the block nor the claim can commit.
        return (
            self.refused is None
            and transaction_kept(mark)
            and not driver_transaction_aborted(self._conn)
        )

    def keep_for_commit(
        self,
        statement: Executable,
        checked: direct.DirectSelect,
        params: Mapping[str, Any],
        vanished: Callable[[int], Exception],
    ) -> bool:
        """Keep a statement run after the block back for the release to carry
        (G36): only where the release itself rides with the ``COMMIT``
        (psycopg's sync driver, the outermost guard, the block shown to keep
        the claim's transaction and the server reporting it healthy, nobody
        watching the statements). The
        release then sends ``checked`` first, or, when it is not kept back
        after all, ``statement``, checking that it changed one row."""
        conn = self._conn
        if not (
            self._nested is not None
            and self._outermost
            and self._shown_kept
            and trips.shares_round_trips(conn)
            and trips.carries_store(conn)
            and direct.unobserved(conn)
        ):
            return False
        self._at_commit = trips.KeptStore(
            statement, checked.forms(conn.dialect), dict(params), vanished
        )
        return True

    def release(self) -> None:
        """End a block that exited normally: flush the session, then release
        the savepoint, the database's word that its transaction still holds
        the claim.

        Raises:
            ConfigurationError: the database no longer knows the savepoint
                (the transaction was committed, rolled back, or rolled back by
                the server); the caller's transaction has been rolled back.
            Exception: the flush failed (re-raised unchanged); the caller's
                transaction has been rolled back.
        """
        self.unwatch()
        try:
            if self._session is not None:
                self._session.flush()  # the block's own changes: their error is its own
        except BaseException:
            self.doom()
            raise
        if self._nested is None:
            return
        store, self._at_commit = self._at_commit, None
        shared = self._shown_kept and trips.shares_round_trips(self._conn)
        if store is not None and not shared:
            try:
                trips.send_store(self._conn, store)
            except BaseException:
                self.doom()
                raise
        try:
            if shared:
                with trips.armed(self._conn, self._lost_error, store):
                    self._nested.commit()
            else:
                self._nested.commit()
        except DBAPIError as error:
            self.doom()
            if error.connection_invalidated:  # the connection is gone: retryable as it is
                raise
            raise self._lost_error() from error
        except BaseException:
            self.doom()
            raise

    def open_late(self) -> None:
        """Open the savepoint now if :func:`open_boundary` left it for later
        (the stdlib SQLite driver outside a transaction): ``BEGIN`` first when
        the claim wrote nothing, so the savepoint nests in a transaction rather
        than being one its release would commit."""
        if self._nested is not None:
            return
        conn = self._conn
        if begin_driver_transaction(conn):
            conn.exec_driver_sql("BEGIN")
        self._late = True
        session = self._session
        self._nested = _savepoint(session, conn)
        if session is not None:
            self._known = frozenset(session.identity_map.keys())
        self._name = getattr(conn.get_nested_transaction(), "_savepoint", None)

    def abandon(self, kept: bool) -> None:
        """End a block that exited by an exception or cancellation (or whose
        transaction did not outlive it, ``kept`` False): roll back to the
        savepoint, so neither the claim nor anything of the block survives;
        when that cannot be done, roll back the whole caller transaction."""
        self._at_commit = None
        self.unwatch()
        if kept and not self._late and self._nested is not None and self._nested.is_active:
            try:
                with warnings.catch_warnings():  # a savepoint a refused commit dropped
                    warnings.simplefilter("ignore", SAWarning)
                    self._nested.rollback()
            except SQLAlchemyError:  # the connection broke (a cancelled statement): roll back all
                pass
            else:
                self._forget()
                return
        self.doom()

    def _forget(self) -> None:
        """After a rollback to the savepoint, make the session match the
        database: forget the objects the block added (pending or flushed) and
        expire the others, whose state the block may have changed."""
        session = self._session
        if session is None:
            return
        for obj in list(session.new):
            session.expunge(obj)
        for key in list(session.identity_map.keys()):
            if key not in self._known:
                session.expunge(session.identity_map[key])
        session.expire_all()

    def doom(self) -> None:
        """Roll back the caller's whole transaction (its claim is gone, so what
        is left of the block must not commit); invalidate the connection when
        even that fails."""
        try:
            with warnings.catch_warnings():  # a savepoint a refused commit already dropped
                warnings.simplefilter("ignore", SAWarning)
                if self._session is not None:
                    self._session.rollback()
                else:
                    self._conn.rollback()
        except SQLAlchemyError:
            self._conn.invalidate()

    def _lost_error(self) -> ConfigurationError:
        msg = (
            f"the transaction holding the claim of {self._label} ended inside the guarded"
            " block: the database no longer knows the guard's savepoint (a commit or"
            " rollback the guard could not see, or a transaction the server rolled back,"
            " such as a deadlock on MariaDB/MySQL). The caller's transaction has been"
            " rolled back and nothing of the block commits; after a deadlock, let the"
            " whole delivery retry (raise) instead of retrying a statement inside the block"
        )
        return ConfigurationError(msg)
