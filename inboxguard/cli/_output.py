"""What the commands print: aligned text for people, ``--json`` for scripts.

Times are ISO 8601 in UTC in both; durations are seconds in JSON and
``1h30m`` for people. Exit statuses (documented in docs/operations.md):

- ``0``: done, nothing wrong found;
- ``1``: the command ran and found something an operator must look at (no
  such record, a failed check, effects left unknown);
- ``2``: bad input or configuration (a usage error, a missing table);
- ``3``: the database could not be reached or refused the statement;
- ``141``: the reader of the output went away (``| head``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from inboxguard._core.retention import format_duration

__all__ = [
    "EXIT_FOUND",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "UsageError",
    "emit_json",
    "fields",
    "human",
    "plain",
    "table",
]

EXIT_OK = 0
EXIT_FOUND = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


class UsageError(Exception):
    """Bad input or configuration: printed on stderr, exit status 2."""


def plain(value: Any) -> Any:
    """``value`` as JSON-ready data: dataclasses as objects, enums as their
    value, datetimes as ISO 8601, timedeltas as seconds."""
    if isinstance(value, enum.Enum | dt.datetime | dt.timedelta):
        return _scalar(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return value


def _scalar(value: enum.Enum | dt.datetime | dt.timedelta) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return value.total_seconds()


def emit_json(value: Any, out: TextIO | None = None) -> None:
    """Print ``value`` as indented JSON with sorted keys."""
    print(json.dumps(plain(value), indent=2, sort_keys=True, default=str), file=out or sys.stdout)


def human(value: Any) -> str:
    """One value as a person reads it: ISO 8601 times, ``1h30m`` durations,
    ``-`` for nothing."""
    if value is None:
        return "-"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, dt.datetime):
        return value.isoformat(timespec="seconds")
    if isinstance(value, dt.timedelta):
        return format_duration(value) if value >= dt.timedelta(seconds=1) else "0s"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO | None = None) -> None:
    """Print rows under headers, each column as wide as its widest cell."""
    cells = [list(headers), *[[human(v) for v in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        line = "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row))
        print(line.rstrip(), file=out or sys.stdout)


def fields(pairs: Sequence[tuple[str, Any]], out: TextIO | None = None) -> None:
    """Print ``name: value`` lines, names aligned."""
    width = max((len(name) for name, _ in pairs), default=0)
    for name, value in pairs:
        print(f"{name + ':':<{width + 1}} {human(value)}", file=out or sys.stdout)
