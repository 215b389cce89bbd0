"""Statements sent to PostgreSQL as one libpq pipeline, one round trip (psycopg 3, sync).

*Features:* the shared half of :mod:`inboxguard.sql.opening` (the claim sent
with the guard's ``BEGIN`` and savepoint) and of the result store sent with
the ``COMMIT`` (:mod:`inboxguard.sql.dialects.postgresql.trips`):

- a :class:`Prepared` statement is adapted by psycopg's own adapters, as its
  cursor adapts one, and runs as a server-side prepared statement whose name
  inboxguard derives from its text and parameter types;
- :func:`send` writes every step and one ``Sync``, then reads every reply:
  one round trip. A statement not yet prepared on the connection is prepared
  in the same pipeline. psycopg's own ``DEALLOCATE ALL`` (which it sends after
  a rollback once it holds prepared statements of its own, and after a
  ``DISCARD ALL``) is watched, so the next pipeline prepares again;
- the first failed step's error is psycopg's error for it (:func:`error_of`);
  the steps after it were skipped by the server.
"""

from __future__ import annotations

import functools
import hashlib
import sys
import weakref
from collections.abc import Sequence
from typing import Any

__all__ = [
    "NO_SUCH_STATEMENT",
    "Prepared",
    "error_of",
    "failed",
    "forget",
    "send",
    "state_of",
    "usable",
]

#: SQLSTATE: the prepared statement named does not exist.
NO_SUCH_STATEMENT = "26000"
#: Per driver connection: the names of the statements prepared on it here.
_PREPARED: weakref.WeakKeyDictionary[Any, set[bytes]] = weakref.WeakKeyDictionary()


class Prepared:
    """One statement with its parameters, adapted for ``dbapi`` as psycopg's
    cursor would adapt it; :meth:`rows` loads a result as its cursor would."""

    __slots__ = ("name", "query", "transformer")

    def __init__(self, dbapi: Any, sql: str, args: Any) -> None:
        self.transformer = sys.modules["psycopg.adapt"].Transformer(dbapi)
        self.query = sys.modules["psycopg._queries"].PostgresQuery(self.transformer)
        self.query.convert(sql, args)
        digest = hashlib.sha256(self.query.query + repr(self.query.types).encode())
        self.name = b"inboxguard_" + digest.hexdigest()[:20].encode()

    def rows(self, result: Any) -> tuple[list[tuple[Any, ...]], int]:
        """The rows and the row count of ``result``, this statement's reply."""
        self.transformer.set_pgresult(result)
        rows = self.transformer.load_rows(0, result.ntuples, tuple)
        count = result.command_tuples
        return rows, -1 if count is None else count


#: A pipeline step: a command without parameters (bytes), or a prepared statement.
Step = bytes | Prepared


def usable(dbapi: Any) -> bool:
    """Whether statements may be pipelined, prepared, on ``dbapi``: not in
    psycopg's own pipeline mode, and prepared statements not turned off
    (``prepare_threshold=None``, as behind a pooler that cannot keep them),
    and a libpq with pipeline mode."""
    if dbapi._pipeline is not None or dbapi.prepare_threshold is None:  # noqa: SLF001
        return False
    return _libpq_pipelines()


@functools.cache
def _libpq_pipelines() -> bool:
    """Whether the libpq psycopg runs on has pipeline mode (libpq 14 and later)."""
    return bool(sys.modules["psycopg"].Pipeline.is_supported())


def send(dbapi: Any, steps: Sequence[Step]) -> list[Any]:
    """Send ``steps`` as one pipeline and return their replies, one a step
    (the ``Parse`` of a statement prepared on the way is not among them).
    A broken connection raises psycopg's error."""
    psycopg = sys.modules["psycopg"]
    pq, generators = psycopg.pq, psycopg.generators
    pgconn = dbapi.pgconn
    prepared = _prepared(dbapi)
    preparing = [s.name for s in steps if isinstance(s, Prepared) and s.name not in prepared]
    results: list[Any] = []
    with dbapi.lock:
        pgconn.enter_pipeline_mode()
        try:
            for step in steps:
                if isinstance(step, bytes):
                    pgconn.send_query_params(step, None)
                    continue
                query = step.query
                if step.name in preparing:
                    pgconn.send_prepare(step.name, query.query, param_types=query.types)
                pgconn.send_query_prepared(step.name, query.params, param_formats=query.formats)
            pgconn.pipeline_sync()
            dbapi.wait(generators.send(pgconn))
            while True:
                got = dbapi.wait(generators.fetch_many(pgconn))
                if got and got[-1].status == pq.ExecStatus.PIPELINE_SYNC:
                    break
                results.extend(got)
        except BaseException:
            _leave(pgconn, quietly=True)  # the error in flight is the one to raise
            raise
        _leave(pgconn)
    return _replies(results, steps, preparing, prepared)


def _leave(pgconn: Any, *, quietly: bool = False) -> None:
    """Leave libpq's pipeline mode (a broken connection has none to leave).
    ``quietly``, after an error left replies unread (an interrupted wait), a
    connection that cannot leave it is closed: its next use then fails as a
    lost connection, which the pool replaces, instead of reading stale replies."""
    if pgconn.status == sys.modules["psycopg"].pq.ConnStatus.BAD:
        return
    try:
        pgconn.exit_pipeline_mode()
    except Exception:
        if not quietly:
            raise
        pgconn.finish()


def _replies(
    results: list[Any], steps: Sequence[Step], preparing: list[bytes], prepared: set[bytes]
) -> list[Any]:
    """One reply a step (None: skipped after a failure), the replies of the
    ``Parse`` messages taken out, and each statement they prepared noted."""
    ok = sys.modules["psycopg"].pq.ExecStatus.COMMAND_OK
    replies = iter(results)
    out: list[Any] = []
    for step in steps:
        if isinstance(step, Prepared) and step.name in preparing:
            parse = next(replies, None)
            if parse is not None and parse.status != ok:  # it failed: its statement never ran
                next(replies, None)
                out.append(parse)
                continue
            if parse is not None:
                prepared.add(step.name)
        out.append(next(replies, None))
    return out


def failed(results: Sequence[Any]) -> Any | None:
    """The first failed reply of a pipeline, None when every step succeeded
    (a step without a reply, or skipped, fails too: the last reply is then
    returned, so the caller raises rather than reads it)."""
    status = sys.modules["psycopg"].pq.ExecStatus
    fatal = next((r for r in results if r is not None and r.status == status.FATAL_ERROR), None)
    if fatal is not None:
        return fatal
    good = (status.COMMAND_OK, status.TUPLES_OK)
    if all(r is not None and r.status in good for r in results):
        return None
    raise sys.modules["psycopg"].errors.InternalError(
        "a pipeline step had no reply although none failed"
    )


def state_of(result: Any) -> str:
    """The SQLSTATE of a failed reply."""
    diag = sys.modules["psycopg"].pq.DiagnosticField.SQLSTATE
    return (result.error_field(diag) or b"").decode("ascii", "replace")


def error_of(dbapi: Any, result: Any) -> Exception:
    """psycopg's error for a failed reply."""
    errors = sys.modules["psycopg"].errors
    return errors.error_from_result(result, encoding=dbapi.info.encoding)  # type: ignore[no-any-return]


def forget(dbapi: Any) -> None:
    """After a statement the server did not know (SQLSTATE 26000), outside a
    transaction: ask the server which of inboxguard's statements it holds,
    so the next pipeline prepares exactly the others."""
    psycopg = sys.modules["psycopg"]
    names = _prepared(dbapi)
    with dbapi.lock:
        result = dbapi.pgconn.exec_(
            b"SELECT name FROM pg_prepared_statements WHERE name LIKE 'inboxguard\\_%'"
        )
    names.clear()
    if result.status == psycopg.pq.ExecStatus.TUPLES_OK:
        names.update(result.get_value(row, 0) for row in range(result.ntuples))


def _prepared(dbapi: Any) -> set[bytes]:
    found = _PREPARED.get(dbapi)
    if found is not None:
        return found
    names: set[bytes] = set()
    _PREPARED[dbapi] = names
    deallocate = type(dbapi)._deallocate  # noqa: SLF001

    def watched(name: bytes | None) -> Any:
        if name is None:
            names.clear()
        return deallocate(dbapi, name)

    dbapi._deallocate = watched  # noqa: SLF001
    return names
