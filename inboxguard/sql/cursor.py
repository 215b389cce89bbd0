"""SQLAlchemy statements run on a DBAPI cursor: the one executor below
SQLAlchemy's ``Connection.execute``.

Two callers run inboxguard's statements on a cursor themselves: the hot
path on the caller's own SQLAlchemy connection (:mod:`inboxguard.sql.direct`)
and the Django store on the connection of the caller's ``atomic()`` block
(:mod:`inboxguard.django`). Both need the same three things, done as a
SQLAlchemy connection would do them: the statement compiled for the
connection's dialect, parameter values through their column types' bind
processing (aware datetimes become naive UTC), and result values through
their result processing. Nothing is ever rendered as a literal.

A :class:`CursorStatement` is one statement compiled for one dialect; callers
keep it (per statement and dialect) and run it with :func:`fetch`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Executable
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeEngine

__all__ = [
    "CursorStatement",
    "Processor",
    "ResultProcessing",
    "fetch",
    "fetch_rows",
    "result_processor",
]

#: A bind or result conversion of one column type.
Processor = Callable[[Any], Any]
#: How a column type's results are converted on one dialect.
ResultProcessing = Callable[[TypeEngine[Any], Dialect], "Processor | None"]


def result_processor(type_: TypeEngine[Any], dialect: Dialect) -> Processor | None:
    """The column type's result processing on ``dialect``, as SQLAlchemy applies it."""
    return type_.dialect_impl(dialect).result_processor(dialect, None)


class CursorStatement:
    """One statement compiled for one dialect: its SQL, the order of its
    positional parameters, and the bind and result conversions of its types."""

    __slots__ = ("columns", "compiled", "keys", "positions", "processors", "sql")

    def __init__(
        self,
        statement: Executable,
        dialect: Dialect,
        results: ResultProcessing = result_processor,
    ) -> None:
        compiled = statement.compile(dialect=dialect)  # type: ignore[attr-defined]
        self.compiled = compiled
        self.sql: str = compiled.string
        # A positional bind style (%s, $1 ...) takes the values in this order.
        self.positions: tuple[str, ...] | None = (
            tuple(compiled.positiontup or ()) if dialect.positional else None
        )
        self.processors: dict[str, Processor] = {}
        for name, bind in compiled.binds.items():
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if process is not None:
                self.processors[name] = process
        columns = getattr(statement, "selected_columns", None)
        if columns is None:
            columns = getattr(statement, "exported_columns", None) or ()
        #: The result columns' names, in order.
        self.keys: tuple[str, ...] = tuple(str(column.key) for column in columns)
        #: The result columns' conversions, in order (None: the value as the driver gives it).
        self.columns: tuple[Processor | None, ...] = tuple(
            results(column.type, dialect) for column in columns
        )

    def complete(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` with the values the statement binds itself (a bound
        parameter's own value, a ``.values(...)`` constant) added."""
        return self.compiled.construct_params(dict(params)) or {}

    def args(self, values: Mapping[str, Any]) -> Any:
        """The driver's parameters of ``values`` (every bound parameter's
        value): converted, and in order for a positional bind style."""
        processors = self.processors
        if self.positions is None:
            return {
                name: processors[name](value) if name in processors else value
                for name, value in values.items()
            }
        return [
            processors[name](values[name]) if name in processors else values[name]
            for name in self.positions
        ]

    def convert(self, row: Sequence[Any]) -> tuple[Any, ...]:
        """A result row with each column's conversion applied."""
        return tuple(
            value if process is None else process(value)
            for value, process in zip(row, self.columns, strict=False)
        )


def fetch(cursor: Any, sql: str, args: Any) -> tuple[Sequence[Sequence[Any]], int, list[str]]:
    """Run ``sql`` on a DBAPI cursor: its raw rows (none for a statement that
    returns none), its rowcount and its result columns' names."""
    cursor.execute(sql, args)
    rowcount: int = cursor.rowcount
    description = cursor.description
    if description is None:
        return [], rowcount, []
    return cursor.fetchall(), rowcount, [d[0] for d in description]


#: libpq's ``ExecStatus`` values that psycopg's ``description`` reads as rows
#: (TUPLES_OK, SINGLE_TUPLE, TUPLES_CHUNK).
_PG_TUPLES = frozenset({2, 9, 12})
_NO_RESULT: Any = object()


def fetch_rows(cursor: Any, sql: str, args: Any) -> tuple[Sequence[Sequence[Any]], int]:
    """:func:`fetch` without the result columns' names (the hot path's claim).

    On a psycopg cursor, whether the statement returned rows is read off its
    result as psycopg's ``description`` reads it, without building a
    ``Column`` for each field; any other cursor is asked for its description."""
    cursor.execute(sql, args)
    rowcount: int = cursor.rowcount
    result = getattr(cursor, "pgresult", _NO_RESULT)
    if result is _NO_RESULT:
        rows = cursor.description is not None
    else:
        rows = bool(result) and bool(result.nfields or result.status in _PG_TUPLES)
    return (cursor.fetchall() if rows else []), rowcount
