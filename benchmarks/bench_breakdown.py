"""Where the time of one guard goes, on PostgreSQL, in one process.

Each round runs three variants, in the order :func:`benchmarks._harness.rotate`
gives that round, ``BENCH_MESSAGES`` messages each, one transaction a message
on a Core connection:

- ``fresh``: ``inbox.guard`` on a fresh command ID, the block assigning a small
  result (so the result store runs);
- ``duplicate``: ``inbox.guard`` on a committed ID;
- ``floor``: one ``INSERT ... ON CONFLICT DO NOTHING`` of the ID into a
  one-column table, the statement the inbox benchmark's ``floor`` adds;
- ``floor savepoint``: the same insert inside a savepoint released after it
  (``begin_nested()``, each statement a round trip of its own), so the
  difference to ``floor`` is what a savepoint costs sent as SQLAlchemy sends it.

Each variant is timed to the COMMIT's reply: on psycopg the guard's release
goes with the COMMIT (G32).

Timed per message: the whole guard (from ``inbox.guard(...)`` to the end of
the ``with``, the caller's block excluded), and each statement's time in the
guard's statement runner (SQLAlchemy's ``Connection.execute``, or the direct
path of :mod:`inboxguard.sql.direct`) and in the driver's ``cursor.execute``
(driver and server, the round trip), without any SQLAlchemy event listener,
which would turn the direct path off. The pure-Python steps
are timed in loops of their own in the same round: validation of the two
identities, the payload digest, the whole of ``prepare`` (validation, digest
and the claim's parameters) and the result's canonical encoding. The flow
and driver overhead is what remains of the whole guard. A cProfile run after
the rounds lists the package's own functions by their own time.

Run with ``python -m benchmarks breakdown``.
"""

from __future__ import annotations

import cProfile
import datetime as dt
import os
import pstats
import statistics
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import TextualSelect, create_engine, text
from sqlalchemy.engine import Engine

from benchmarks import _harness
from benchmarks._harness import Load
from benchmarks._report import table, write_section
from inboxguard import Inbox
from inboxguard._core.digest import canonical_json, digest_of
from inboxguard._core.identity import validate_identity
from inboxguard.inbox import _drive
from inboxguard.inbox._decide import prepare
from inboxguard.sql import pg_pipeline
from inboxguard.sql.dialects.postgresql import trips_psycopg

PG_ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
MESSAGES = int(os.environ.get("BENCH_MESSAGES", "2000"))
WARMUP = 300
VARIANTS = ("fresh", "duplicate", "floor", "floor savepoint")
CONSUMER = "billing.transfers"
RESULT = {"status": "applied", "ledger_id": 12345}
PACKAGE = str(Path(__file__).resolve().parent.parent / "inboxguard")


def _payload(cid: str) -> dict[str, Any]:
    return {"id": cid, "account": "acc-42", "amount": 1250, "currency": "EUR", "note": "rent"}


class StatementClock:
    """Per-statement time in the guard's statement runner and in ``cursor.execute``.

    SQLAlchemy's statement events would send the claim through
    ``Connection.execute`` (a connection with listeners never takes the direct
    path, :mod:`inboxguard.sql.direct`), so the clock listens to nothing: it
    wraps the runner the sync driver calls for each statement, and times the
    driver's own ``execute`` in a psycopg cursor class given to the engine.
    """

    def __init__(self) -> None:
        self.sa: dict[str, float] = defaultdict(float)
        self.cursor: dict[str, float] = defaultdict(float)
        self._label = ""
        self._runner = _drive.execute
        self._sent = trips_psycopg._sent  # noqa: SLF001 - the boundary's shared round trips
        self._pipelined = pg_pipeline.send  # the claim's and the store's pipelines (G35, G36)
        self.on = False

    def cursor_class(self) -> type[psycopg.Cursor[Any]]:
        """A psycopg cursor that reports each ``execute`` to this clock."""
        clock = self

        class TimedCursor(psycopg.Cursor[Any]):
            def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return super().execute(query, *args, **kwargs)
                finally:
                    if clock.on:
                        clock.cursor[_label(str(query))] += time.perf_counter() - start

        return TimedCursor

    def start(self) -> None:
        """Time the guard's statements (the profile runs without the wrapper)."""
        runner = self._runner
        sent = self._sent

        def timed_sent(dbapi: Any, command: bytes) -> bool:
            start = time.perf_counter()
            try:
                return sent(dbapi, command)
            finally:
                self.cursor[_boundary_label(command)] += time.perf_counter() - start

        trips_psycopg._sent = timed_sent  # noqa: SLF001
        pipelined = self._pipelined

        def timed_pipeline(dbapi: Any, steps: Any) -> Any:
            start = time.perf_counter()
            try:
                return pipelined(dbapi, steps)
            finally:
                self.cursor[_pipeline_label(steps)] += time.perf_counter() - start

        pg_pipeline.send = timed_pipeline  # type: ignore[assignment]

        def timed(conn: Any, statement: Any, params: Any) -> Any:
            start = time.perf_counter()
            try:
                return runner(conn, statement, params)
            finally:
                self.sa[_kind(statement)] += time.perf_counter() - start

        _drive.execute = timed  # type: ignore[assignment]
        self.on = True

    def close(self) -> None:
        _drive.execute = self._runner  # type: ignore[assignment]
        trips_psycopg._sent = self._sent  # noqa: SLF001
        pg_pipeline.send = self._pipelined  # type: ignore[assignment]
        self.on = False

    def reset(self) -> None:
        self.sa.clear()
        self.cursor.clear()


def _kind(statement: Any) -> str:
    """The label of a statement object (never compiled: ``str()`` would compile it)."""
    if isinstance(statement, TextualSelect):
        return _label(str(statement.element.text))  # the SQL text as written
    return "store" if getattr(statement, "is_update", False) else "other"


def _label(statement: str) -> str:
    head = statement.lstrip()[:6].upper().split(" ")[0]
    labels = {"WITH": "claim", "UPDATE": "store", "INSERT": "floor"}
    labels |= {"SAVEPO": "savepoint", "RELEAS": "savepoint"}  # the guard's boundary
    return labels.get(head, "other")


def _pipeline_label(steps: Any) -> str:
    """The label of a pipeline the guard sends (psycopg)."""
    if isinstance(steps[0], bytes) and steps[0].startswith(b"BEGIN"):
        return "claim with begin"
    if b"COMMIT" in steps:
        return "store with commit"
    return "pipeline"


def _boundary_label(command: bytes) -> str:
    """The label of a query the guard's boundary sends on its own (psycopg)."""
    if command.startswith(b"BEGIN"):
        return "begin with savepoint"
    if command.endswith(b"COMMIT"):
        return "release with commit"
    return "savepoint"


def _loop(n: int, fn: Callable[[int], object]) -> float:
    """Seconds per call of ``fn(i)`` over ``n`` calls."""
    start = time.perf_counter()
    for i in range(n):
        fn(i)
    return (time.perf_counter() - start) / n


def _guards(engine: Engine, inbox: Inbox, ids: list[str]) -> float:
    """Guard each ID in a transaction of its own; seconds per message from the
    guard's start to the COMMIT's reply (the caller's block excluded): on
    psycopg the guard's release goes with the COMMIT, so the commit is timed."""
    spent = 0.0
    for cid in ids:
        with engine.connect() as conn:
            start = time.perf_counter()
            with conn.begin():
                with inbox.guard(
                    conn, consumer=CONSUMER, command_id=cid, payload=_payload(cid)
                ) as e:
                    inside = time.perf_counter()
                    if not e.duplicate:
                        e.result = RESULT
                    block = time.perf_counter() - inside
            spent += time.perf_counter() - start - block
    return spent / len(ids)


def _floor(engine: Engine, prefix: str, ids: list[str], *, savepoint: bool = False) -> float:
    """Seconds per message of the one-column insert, to the COMMIT's reply."""
    stmt = text(f"INSERT INTO {prefix}floor (command_id) VALUES (:cid) ON CONFLICT DO NOTHING")
    spent = 0.0
    for cid in ids:
        with engine.connect() as conn:
            start = time.perf_counter()
            with conn.begin():
                if savepoint:
                    with conn.begin_nested():
                        conn.execute(stmt, {"cid": cid})
                else:
                    conn.execute(stmt, {"cid": cid})
            spent += time.perf_counter() - start
    return spent / len(ids)


def _python_steps(inbox: Inbox, tag: str) -> dict[str, float]:
    ids = [f"{tag}-py-{i}" for i in range(MESSAGES)]
    payloads = [_payload(c) for c in ids]

    def validation(i: int) -> None:
        validate_identity(CONSUMER, "consumer")
        validate_identity(ids[i], "command_id")

    def whole(i: int) -> None:
        prepare(
            CONSUMER, ids[i], payloads[i], (), None, retention=inbox.retention, clock=inbox.clock
        )

    return {
        "validation": _loop(MESSAGES, validation),
        "digest": _loop(MESSAGES, lambda i: digest_of(payloads[i])),
        "prepare": _loop(MESSAGES, whole),
        "result encoding": _loop(MESSAGES, lambda _i: canonical_json(RESULT, root="result")),
    }


def _round(
    engine: Engine, inbox: Inbox, clock: StatementClock, prefix: str, order: list[str], i: int
) -> dict[str, float]:
    out: dict[str, float] = {}
    fresh = [f"r{i}-{n}" for n in range(MESSAGES)]
    dup = [f"r{i}-dup-{n}" for n in range(MESSAGES)]
    _guards(engine, inbox, dup)  # untimed: the duplicates' evidence
    for variant in order:
        clock.reset()
        if variant == "fresh":
            out["fresh"] = _guards(engine, inbox, fresh)
            for label in ("claim", "store"):
                out[f"fresh {label} sa"] = clock.sa[label] / MESSAGES
                out[f"fresh {label} cursor"] = clock.cursor[label] / MESSAGES
            out["fresh savepoint cursor"] = clock.cursor["savepoint"] / MESSAGES
            for label in (
                "begin with savepoint",
                "release with commit",
                "claim with begin",
                "store with commit",
            ):
                out[f"fresh {label}"] = clock.cursor[label] / MESSAGES
        elif variant == "duplicate":
            out["duplicate"] = _guards(engine, inbox, dup)
            out["duplicate claim sa"] = clock.sa["claim"] / MESSAGES
            out["duplicate claim cursor"] = clock.cursor["claim"] / MESSAGES
            out["duplicate claim with begin"] = clock.cursor["claim with begin"] / MESSAGES
        elif variant == "floor":
            out["floor"] = _floor(engine, prefix, [f"{c}-floor" for c in fresh])
            out["floor cursor"] = clock.cursor["floor"] / MESSAGES
        else:
            ids = [f"{c}-floor-sp" for c in fresh]
            out["floor savepoint"] = _floor(engine, prefix, ids, savepoint=True)
    out.update(_python_steps(inbox, f"r{i}"))
    return out


def _profile(engine: Engine, inbox: Inbox, n: int) -> list[list[object]]:
    """The package's own functions by own time, per guard (fresh and duplicate)."""
    ids = [f"prof-{k}" for k in range(n)]
    profiler = cProfile.Profile()
    profiler.enable()
    _guards(engine, inbox, ids)
    _guards(engine, inbox, ids)
    profiler.disable()
    stats: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = []
    for (path, line, name), (_cc, calls, own, cum, _callers) in stats.items():
        if path.startswith(PACKAGE):
            rel = Path(path).relative_to(Path(PACKAGE).parent)
            rows.append((own, calls, cum, f"`{rel}:{line}({name})`"))
    rows.sort(reverse=True)
    guards = 2 * n
    return [
        [where, f"{calls / guards:.1f}", f"{own / guards * 1e6:.1f}", f"{cum / guards * 1e6:.1f}"]
        for own, calls, cum, where in rows[:15]
    ]


def _us(values: list[float]) -> str:
    """Median (min-max) of per-round seconds, in microseconds."""
    us = [v * 1e6 for v in values]
    return f"{statistics.median(us):.0f} ({min(us):.0f}-{max(us):.0f})"


def _steps(rounds: list[dict[str, float]]) -> list[list[object]]:
    def col(key: str) -> list[float]:
        return [r[key] for r in rounds]

    def derived(fn: Callable[[dict[str, float]], float]) -> list[float]:
        return [fn(r) for r in rounds]

    fresh_total = col("fresh")

    def rest(r: dict[str, float]) -> float:
        return (
            r["fresh"]
            - r["prepare"]
            - r["fresh claim sa"]
            - r["fresh store sa"]
            - r["result encoding"]
            - r["fresh savepoint cursor"]
            - r["fresh begin with savepoint"]
            - r["fresh release with commit"]
            - r["fresh store with commit"]
        )

    steps = [
        ("validation (consumer and command ID)", col("validation")),
        ("payload digest (canonical text + SHA-256)", col("digest")),
        (
            "claim parameters (the rest of `prepare`)",
            derived(lambda r: r["prepare"] - r["validation"] - r["digest"]),
        ),
        (
            "`BEGIN`, `SAVEPOINT` and the claim in one pipeline (psycopg, G35): driver + server",
            col("fresh claim with begin"),
        ),
        (
            "claim statement sent alone: driver + server (`cursor.execute`)",
            col("fresh claim cursor"),
        ),
        (
            "claim statement: the runner around it (direct path)",
            derived(
                lambda r: (
                    r["fresh claim sa"] - r["fresh claim cursor"] - r["fresh claim with begin"]
                )
            ),
        ),
        ("result encoding (canonical JSON)", col("result encoding")),
        ("result store sent alone: driver + server", col("fresh store cursor")),
        (
            "result store: the runner around it (direct path)",
            derived(lambda r: r["fresh store sa"] - r["fresh store cursor"]),
        ),
        (
            "`BEGIN; SAVEPOINT` in one query (psycopg, G32): driver + server",
            col("fresh begin with savepoint"),
        ),
        (
            "`RELEASE SAVEPOINT; COMMIT` in one query (psycopg, G32): driver + server",
            col("fresh release with commit"),
        ),
        (
            "result store, `RELEASE` and `COMMIT` in one pipeline (psycopg, G36): driver + server",
            col("fresh store with commit"),
        ),
        (
            "the guard's savepoint or release sent alone: driver + server",
            col("fresh savepoint cursor"),
        ),
        ("flow and driver (session checks, generator, entry, telemetry)", derived(rest)),
    ]
    rows: list[list[object]] = []
    for label, values in steps:
        share = statistics.median(v / t for v, t in zip(values, fresh_total, strict=True))
        rows.append([label, _us(values), f"{share:.0%}"])
    rows.append(["**whole fresh guard, to the COMMIT's reply**", _us(fresh_total), "100%"])
    return rows


def main() -> None:
    """Time the steps of a guard on PostgreSQL and profile it."""
    sys.path.insert(0, os.getcwd())
    n_rounds = _harness.rounds()
    load = Load()
    began = time.perf_counter()
    db = f"bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(f"{PG_ADMIN}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{db}"'))
    prefix = "bd_"
    try:
        clock = StatementClock()
        engine = create_engine(
            f"{PG_ADMIN}/{db}", pool_size=1, connect_args={"cursor_factory": clock.cursor_class()}
        )
        inbox = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
        inbox.create_schema()
        with engine.begin() as conn:
            conn.execute(text(f"CREATE TABLE {prefix}floor (command_id VARCHAR(255) PRIMARY KEY)"))
        warm = [f"warm-{k}" for k in range(WARMUP)]
        _guards(engine, inbox, warm)
        _guards(engine, inbox, warm)
        _floor(engine, prefix, warm)
        clock.start()
        rounds = _harness.run_rounds(
            VARIANTS,
            lambda order, i: _round(engine, inbox, clock, prefix, order, i),
            n_rounds,
        )
        clock.close()
        profile = _profile(engine, inbox, min(MESSAGES, 1000))
        engine.dispose()
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()
    load.stop()
    statements = [
        [
            "fresh claim with `BEGIN` and `SAVEPOINT` (one pipeline)",
            _us([r["fresh claim with begin"] for r in rounds]),
        ],
        [
            "duplicate claim with `BEGIN` and `SAVEPOINT` (one pipeline)",
            _us([r["duplicate claim with begin"] for r in rounds]),
        ],
        ["one-column floor insert", _us([r["floor cursor"] for r in rounds])],
        [
            "result store, `RELEASE` and `COMMIT` (one pipeline; fresh only)",
            _us([r["fresh store with commit"] for r in rounds]),
        ],
        ["`BEGIN; SAVEPOINT` (one query)", _us([r["fresh begin with savepoint"] for r in rounds])],
        [
            "`RELEASE SAVEPOINT; COMMIT` (one query)",
            _us([r["fresh release with commit"] for r in rounds]),
        ],
        [
            "`SAVEPOINT` or `RELEASE` sent alone",
            _us([r["fresh savepoint cursor"] for r in rounds]),
        ],
    ]
    savepoint_cost = [
        ["floor insert alone (to the COMMIT's reply)", _us([r["floor"] for r in rounds])],
        [
            "floor insert in a savepoint (`begin_nested()`)",
            _us([r["floor savepoint"] for r in rounds]),
        ],
        [
            "ratio (savepoint / alone)",
            f"{statistics.median(r['floor savepoint'] / r['floor'] for r in rounds):.2f}",
        ],
    ]
    body = (
        f"PostgreSQL, one process, {MESSAGES:,} messages per variant per round after a"
        f" {WARMUP}-message warm-up, {n_rounds} rounds with the variants (fresh guard,"
        " duplicate guard, floor insert, floor insert in a savepoint) in a rotated order;"
        " figures are microseconds per message, median (min-max) over the rounds. Each"
        " message is one transaction on a Core connection; a fresh guard's block assigns"
        " a small result, so the result store runs. Statement times come from a wrapper"
        " around the guard's statement runner and a timed psycopg cursor (no SQLAlchemy"
        " event listener, which would turn the claim's direct path off);"
        " the pure-Python steps are timed in loops of their own; the flow and driver line"
        " is what remains of the whole guard. Every variant is timed to the COMMIT's"
        " reply, since on psycopg the guard's release (and the result store) goes with the"
        " COMMIT and its savepoint (and the claim) with the transaction's `BEGIN` (G32,"
        " G35, G36): the guard's whole transaction"
        " but the caller's block, against the floor insert's whole transaction. psycopg"
        " sends a `BEGIN` of its own before the floor insert, timed in that"
        " variant.\n\n"
        + table(["step of a fresh guard", "µs per guard", "share"], _steps(rounds))
        + "\n\nOne statement's round trip (driver + server), µs:\n\n"
        + table(["statement", "µs"], statements)
        + "\n\nWhat a savepoint costs one statement (the `floor savepoint` variant), µs:\n\n"
        + table(["variant", "µs per message"], savepoint_cost)
        + f"\n\nUnder cProfile ({2 * min(MESSAGES, 1000):,} guards, half fresh, half"
        " duplicate; profiled times are inflated), the package's own functions by own time"
        " per guard:\n\n"
        + table(["function", "calls per guard", "own µs", "cumulative µs"], profile)
        + f"\n\nThe run took {time.perf_counter() - began:.0f} s."
    )
    write_section(
        "breakdown",
        "Where the time goes (`benchmarks/bench_breakdown.py`)",
        body,
        load=load,
        rounds=n_rounds,
    )


if __name__ == "__main__":
    main()
