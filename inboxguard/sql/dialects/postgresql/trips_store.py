"""A result store carried by the guard's release to the ``COMMIT`` (psycopg 3, sync; G36).

*Features:* where the guard's release rides with the ``COMMIT``
(:mod:`.trips_psycopg`), the result store run after the block can ride too:
:meth:`inboxguard.sql.boundary.Boundary.keep_for_commit` keeps it as a
:class:`KeptStore`, and the commit sends, as one libpq pipeline
(:mod:`inboxguard.sql.pg_pipeline`), its variant that fails unless it updated
exactly one row (a division by zero otherwise), the ``RELEASE`` and the
``COMMIT``. A failed step skips the rest, so nothing commits: the transaction
is rolled back and the store's error, or the release's, is raised. The store
is sent on its own first when a statement of the caller's comes before the
commit (it might end the transaction), or as the flow sends it when the
release is not kept back after all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from sqlalchemy import Connection, Executable

from inboxguard.sql import pg_pipeline
from inboxguard.sql.cursor import CursorStatement
from inboxguard.sql.direct import execute

__all__ = ["KeptStore", "carried", "send_checked", "send_store"]

#: SQLSTATE: division by zero, the kept result store's failed check.
_NOT_ONE_ROW = "22012"


class KeptStore(NamedTuple):
    """A statement run after the block, kept back for the release to carry."""

    #: The statement as the flow asked for it (sent alone, its row count checked).
    statement: Executable
    #: Its variant that fails unless it changed one row, compiled for the dialect.
    checked: CursorStatement
    params: dict[str, Any]
    #: The error when it changed another number of rows than one.
    vanished: Callable[[int], Exception]

    def prepared(self, dbapi: Any) -> pg_pipeline.Prepared:
        """The checked variant with its parameters, for a pipeline on ``dbapi``."""
        return pg_pipeline.Prepared(dbapi, self.checked.sql, self.checked.args(self.params))


def carried(
    dbapi: Any, store: KeptStore, name: str, lost: Callable[[], Exception], then: bytes
) -> None:
    """Send the store's checked variant, the release of savepoint ``name`` and
    (``then`` not empty) the ``COMMIT`` as one pipeline; on a failure, roll
    back and raise the store's error (``store.vanished``), or the release's
    (``lost``)."""
    steps: list[pg_pipeline.Step] = [store.prepared(dbapi), b"RELEASE SAVEPOINT " + name.encode()]
    if then:
        steps.append(b"COMMIT")
    results = pg_pipeline.send(dbapi, steps)
    failed = pg_pipeline.failed(results)
    if failed is None:
        return
    type(dbapi).rollback(dbapi)
    if results[0] is not failed:
        raise lost()
    raise _store_error(dbapi, store, failed)


def send_checked(dbapi: Any, store: KeptStore) -> None:
    """Send the store's checked variant alone (one round trip), before a
    statement of the caller's; its failure leaves the transaction aborted."""
    failed = pg_pipeline.failed(pg_pipeline.send(dbapi, [store.prepared(dbapi)]))
    if failed is not None:
        raise _store_error(dbapi, store, failed)


def send_store(connection: Connection, store: KeptStore) -> None:
    """Send a store kept back for a release that is not kept back after all,
    as the flow sends it, checking that it changed one row."""
    stored: Any = execute(connection, store.statement, store.params)
    if stored.rowcount != 1:
        raise store.vanished(stored.rowcount)


def _store_error(dbapi: Any, store: KeptStore, failed: Any) -> Exception:
    state = pg_pipeline.state_of(failed)
    if state == _NOT_ONE_ROW:
        return store.vanished(0)
    if state == pg_pipeline.NO_SUCH_STATEMENT:
        pg_pipeline.forget(dbapi)  # the next store prepares it again; this one is lost
    return pg_pipeline.error_of(dbapi, failed)
