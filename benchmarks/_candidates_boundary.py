"""The candidates benchmark's variants of the guard's boundary (issue 37).

Since issue 31 the guard runs the claim and the block inside a savepoint of
the caller's transaction: ``SAVEPOINT`` before the claim, ``RELEASE`` after
the block (the database's word that the transaction holding the claim is
still the one it started in), then the caller's ``COMMIT``. These variants
send what the guard sends, and the cuts of it that keep every guarantee of
G17-G24, on a raw psycopg connection like the other candidates:

- ``guard``: ``SAVEPOINT``, the claim, the handler, ``RELEASE``, ``COMMIT``,
  each its own round trip (what the package sent until 2026-12-02, and still
  sends where a statement listener watches the connection or on other
  drivers);
- ``guard: savepoint pipelined``: ``SAVEPOINT`` and the claim in one round
  trip (psycopg's pipeline mode; the claim's reply is read after both);
- ``guard: release with commit``: ``RELEASE`` and ``COMMIT`` in one round
  trip. A failed ``RELEASE`` aborts the transaction, and the ``COMMIT``
  behind it in the pipeline then rolls back, so nothing of the block commits
  after a lost savepoint (possible only where the guard's caller sends the
  ``COMMIT``: an adapter that began the transaction itself);
- ``guard: both pipelined``: the two cuts together;
- ``guard: release; commit as one query``: ``RELEASE`` and ``COMMIT`` in one
  simple-protocol query string, without pipeline mode: a failed ``RELEASE``
  skips the rest of the string and leaves the transaction aborted, so the
  ``COMMIT`` never runs;
- ``guard: begin; savepoint and release; commit``: the same, and ``BEGIN``
  sent with the ``SAVEPOINT`` in one query too (psycopg otherwise sends its
  ``BEGIN`` as a round trip of its own before the first statement): the
  round trips of the claim without a savepoint: what the guard sends on
  psycopg since 2026-12-02 (``inboxguard/sql/dialects/postgresql/trips.py``,
  G32);
- ``guard: claim with begin and savepoint; release; commit``: what the guard
  sends on psycopg since G35: ``BEGIN``, ``SAVEPOINT`` and the claim (a
  prepared statement) as one libpq pipeline
  (:func:`inboxguard.sql.pg_pipeline.send`, written together and read after
  one ``Sync``), the handler, then ``RELEASE SAVEPOINT; COMMIT`` as one query;
- ``guard: xid check with commit``: no savepoint, for an adapter that began
  the transaction and rolls all of it back on failure. The transaction's id,
  read in the claim's round trip, is checked at the exit by a statement that
  fails when it changed (``txid_current_if_assigned()``), pipelined with the
  ``COMMIT``, so the exit is still verified by the database and a failed
  check turns the ``COMMIT`` into a rollback.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from inboxguard.sql import pg_pipeline

if TYPE_CHECKING:
    import psycopg

    from benchmarks.bench_candidates import Variant

__all__ = ["BOUNDARY", "ONE_QUERY", "OWN_BEGIN", "WITH_CLAIM", "boundary_message"]

BOUNDARY = (
    "guard",
    "guard: savepoint pipelined",
    "guard: release with commit",
    "guard: both pipelined",
    "guard: release; commit as one query",
    "guard: begin; savepoint and release; commit",
    "guard: claim with begin and savepoint; release; commit",
    "guard: xid check with commit",
)
#: The variant that runs on an autocommit connection, sending BEGIN itself.
ONE_QUERY = "guard: begin; savepoint and release; commit"
#: The variant that sends BEGIN, SAVEPOINT and the claim as one pipeline (G35).
WITH_CLAIM = "guard: claim with begin and savepoint; release; commit"
#: The variants that run on an autocommit connection, sending BEGIN themselves.
OWN_BEGIN = (ONE_QUERY, WITH_CLAIM)
#: The name SQLAlchemy gives the first savepoint of a connection.
_SAVEPOINT = "sa_savepoint_1"
_XID = "SELECT txid_current()"
_XID_CHECK = "SELECT 1 / coalesce(txid_current_if_assigned() = %(xid)s, false)::int"


def boundary_message(v: Variant, params: dict[str, Any]) -> float:
    """Seconds for one message sent as boundary variant ``v.name`` does."""
    name, conn = v.name, v.conn
    start = time.perf_counter()
    with conn.cursor() as cur:
        xid = None
        if name == "guard: xid check with commit":
            with conn.pipeline(), conn.cursor() as xid_cur:
                xid_cur.execute(_XID)  # read with the claim's reply: one round trip
                fresh = v.claim_once(cur, params)
                xid = xid_cur.fetchone()
        elif name == ONE_QUERY:
            cur.execute(f"BEGIN; SAVEPOINT {_SAVEPOINT}", prepare=False)
            fresh = v.claim_once(cur, params)
        elif name == WITH_CLAIM:
            fresh = _claim_with_begin(v, conn, cur, params)
        elif name in {"guard: savepoint pipelined", "guard: both pipelined"}:
            with conn.pipeline():
                cur.execute(f"SAVEPOINT {_SAVEPOINT}")
                fresh = v.claim_once(cur, params)
        else:
            cur.execute(f"SAVEPOINT {_SAVEPOINT}")
            fresh = v.claim_once(cur, params)
        if fresh:
            cur.execute(v.update)
            cur.execute(v.ledger, params)
        _exit(name, conn, cur, None if xid is None else xid[0])
    return time.perf_counter() - start


def _claim_with_begin(
    v: Variant, conn: psycopg.Connection[Any], cur: psycopg.Cursor[Any], params: dict[str, Any]
) -> bool:
    """``BEGIN``, ``SAVEPOINT`` and the claim as one pipeline, as the guard
    sends them (G35); True when the claim is fresh."""
    claim = pg_pipeline.Prepared(conn, v.claim, params)
    replies = pg_pipeline.send(conn, [b"BEGIN", f"SAVEPOINT {_SAVEPOINT}".encode(), claim])
    failed = pg_pipeline.failed(replies)
    if failed is not None:
        raise pg_pipeline.error_of(conn, failed)
    rows, _ = claim.rows(replies[-1])
    if rows:
        return bool(rows[0][3])
    cur.execute(v.stored, params)  # a lost race
    cur.fetchone()
    return False


def _exit(name: str, conn: psycopg.Connection[Any], cur: psycopg.Cursor[Any], xid: Any) -> None:
    if xid is not None:
        with conn.pipeline():
            cur.execute(_XID_CHECK, {"xid": xid})
            conn.commit()
        return
    if name in {"guard: release; commit as one query", *OWN_BEGIN}:
        cur.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}; COMMIT", prepare=False)
        conn.commit()  # psycopg's bookkeeping: the server is already outside the transaction
        return
    if name in {"guard: release with commit", "guard: both pipelined"}:
        with conn.pipeline():
            cur.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
            conn.commit()
        return
    cur.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
    conn.commit()
