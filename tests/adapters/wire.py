"""What a guarded delivery sends to PostgreSQL, read from libpq's own trace.

SQLAlchemy's statement events would not do: a listener turns off the direct
path the claim takes (``inboxguard.sql.direct``), and they never show BEGIN
or COMMIT. libpq's trace records every protocol message the connection
writes, whichever layer wrote it. The engine must hold one connection
(``pool_size=1, max_overflow=0``) so that every delivery runs on the traced one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

#: PQTRACE_SUPPRESS_TIMESTAMPS | PQTRACE_REGRESS_MODE: no timestamps or OIDs in the trace.
_FLAGS = 1 | 2
_QUERY = re.compile(r'^F\t\d+\tQuery\t "(.*)"$', re.DOTALL)
_PARSE = re.compile(r'^F\t\d+\tParse\t "([^"]*)" "(.*)" \d+(?: \S+)*$', re.DOTALL)
_BIND = re.compile(r'^F\t\d+\tBind\t "[^"]*" "([^"]*)"')
_SYNC = re.compile(r"^F\t\d+\tSync$")


class Wire:
    """The statements sent while tracing: ``"BEGIN"``, ``"COMMIT"`` and the
    text of each executed statement (whitespace folded), in order."""

    def __init__(self) -> None:
        self.statements: list[str] = []
        #: The names of the statements prepared (``Parse``) while tracing.
        self.parsed: list[str] = []

    def parsed_named(self, start: str) -> list[str]:
        """The statements prepared while tracing whose name begins with ``start``."""
        return [name for name in self.parsed if name.startswith(start)]

    def kinds(self, prefix: str, body_table: str) -> list[str]:
        """The statements named, one entry a round trip: ``"claim"`` and
        ``"result store"`` on the inbox of ``prefix``, ``"body INSERT"`` into
        ``body_table``, ``"savepoint"`` and ``"release"`` for the guard's
        savepoint; any other statement as its text. Statements sent as one
        simple query, or in one pipeline, are named together, joined by
        ``" + "`` (``"BEGIN + savepoint + claim"``)."""
        return [
            " + ".join(_kind(part.strip(), prefix, body_table) for part in statement.split(";"))
            for statement in self.statements
        ]


def _kind(statement: str, prefix: str, body_table: str) -> str:
    if (
        statement.startswith("WITH claimed AS (INSERT INTO")
        and f"INSERT INTO {prefix}inbox " in statement
    ):
        return "claim"
    if statement.startswith(
        (f"UPDATE {prefix}inbox SET result =", f"WITH stored AS (UPDATE {prefix}inbox SET result =")
    ):
        return "result store"
    if statement.startswith(f"INSERT INTO {body_table} "):
        return "body INSERT"
    if statement.startswith("SAVEPOINT "):
        return "savepoint"
    if statement.startswith("RELEASE SAVEPOINT "):
        return "release"
    return statement


@contextmanager
def traced(engine: Engine, tmp_path: Path) -> Iterator[Wire]:
    """Trace the engine's single pooled connection for the ``with`` block."""
    assert engine.pool.size() == 1, "trace an engine of one connection"  # type: ignore[attr-defined]
    with engine.connect() as conn:
        pgconn: Any = conn.connection.dbapi_connection.pgconn  # type: ignore[union-attr]
    if not hasattr(pgconn, "set_trace_flags"):
        pytest.skip("this psycopg/libpq cannot trace a connection")
    wire = Wire()
    path = tmp_path / "libpq.trace"
    with path.open("w") as out:
        pgconn.trace(out.fileno())
        pgconn.set_trace_flags(_FLAGS)
        try:
            yield wire
        finally:
            pgconn.untrace()
    with engine.connect() as conn:  # the same (only) connection: what it prepared earlier
        rows = conn.exec_driver_sql("SELECT name, statement FROM pg_prepared_statements").all()
        conn.commit()  # a ROLLBACK would make psycopg deallocate every prepared statement
    prepared = {str(name): " ".join(str(text).split()) for name, text in rows}
    trace = path.read_text()
    wire.statements.extend(_statements(trace, prepared))
    wire.parsed.extend(found.group(1) for line in _messages(trace) if (found := _PARSE.match(line)))


def _messages(trace: str) -> Iterator[str]:
    """One line per protocol message (a statement's own newlines rejoined)."""
    message = ""
    for line in trace.splitlines():
        if line.startswith(("F\t", "B\t")) and message:
            yield message
            message = ""
        message = f"{message}\n{line}" if message else line
    if message:
        yield message


def _statements(trace: str, prepared: dict[str, str]) -> Iterator[str]:
    """One entry a round trip: a simple query's text, or the statements bound
    before one ``Sync`` (a pipeline), joined by ``"; "``."""
    parsed = dict(prepared)
    bound: list[str] = []
    for line in _messages(trace):
        if found := _QUERY.match(line):
            yield found.group(1)
        elif found := _PARSE.match(line):
            parsed[found.group(1)] = " ".join(found.group(2).split())
        elif found := _BIND.match(line):
            name = found.group(1)
            bound.append(parsed.get(name, f"<statement {name} prepared before the trace>"))
        elif _SYNC.match(line) and bound:
            yield "; ".join(bound)
            bound = []
