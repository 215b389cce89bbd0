"""What a guarded delivery sends to PostgreSQL through an asyncio driver, one entry a round trip.

On psycopg's ``AsyncConnection`` it is libpq's own trace, as for the sync
driver (:mod:`tests.adapters.wire`). asyncpg has no trace like libpq's, but
every request it makes of the server goes through one object: the protocol
of its connection, whose coroutines (``query`` for the simple protocol,
``prepare``, ``bind_execute`` and their kin for the extended one) each write
their messages, end them with a ``Sync`` (or send one simple ``Query``) and
wait for the server's ``ReadyForQuery``. So one call is one round trip,
whichever layer made it (SQLAlchemy's adapter, asyncpg's ``Transaction``,
inboxguard's shortcuts, a raw ``execute()``). :func:`traced` puts a counting
stand-in in front of that protocol on the asyncpg connection itself for the
``with`` block; the engine must hold one connection (``pool_size=1,
max_overflow=0``) so that every delivery runs on the traced one. The
statements are recorded as :class:`tests.adapters.wire.Wire` records them, a
``prepare`` as ``"PREPARE "`` and its text.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from tests.adapters.wire import _FLAGS, Wire, _statements

#: The protocol's coroutines that each make one round trip, and how to name it.
_TRIPS = {
    "query": lambda a: a[0].strip().rstrip(";"),
    "prepare": lambda a: "PREPARE " + " ".join(a[1].split()),
    "bind_execute": lambda a: " ".join(a[0].query.split()),
    "bind_execute_many": lambda a: " ".join(a[0].query.split()),
    "bind": lambda a: "BIND " + " ".join(a[0].query.split()),
    "execute": lambda a: "EXECUTE " + " ".join(a[0].query.split()),
    "close_statement": lambda a: "CLOSE " + a[0].name,
    "close_portal": lambda a: "CLOSE PORTAL",
    "copy_in": lambda a: " ".join(a[0].split()),
    "copy_out": lambda a: " ".join(a[0].split()),
}


class _Counting:
    """The asyncpg protocol with each round trip recorded on ``wire``."""

    def __init__(self, real: Any, wire: Wire) -> None:
        self._real = real
        self._wire = wire

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        name_of = _TRIPS.get(name)
        if name_of is None:
            return attr

        async def trip(*args: Any, **kwargs: Any) -> Any:
            self._wire.statements.append(name_of(args))
            return await attr(*args, **kwargs)

        return trip


@asynccontextmanager
async def traced(engine: AsyncEngine) -> AsyncIterator[Wire]:
    """Record the round trips of the engine's single pooled connection."""
    assert engine.pool.size() == 1, "trace an engine of one connection"  # type: ignore[attr-defined]
    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        con: Any = raw.driver_connection
    wire = Wire()
    if hasattr(con, "pgconn"):  # psycopg: libpq's trace
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "libpq.trace"
            with path.open("w") as out:
                con.pgconn.trace(out.fileno())
                con.pgconn.set_trace_flags(_FLAGS)
                try:
                    yield wire
                finally:
                    con.pgconn.untrace()
            wire.statements.extend(_statements(path.read_text(), {}))
        return
    real = con._protocol  # see the module's docstring
    con._protocol = _Counting(real, wire)
    try:
        yield wire
    finally:
        con._protocol = real
