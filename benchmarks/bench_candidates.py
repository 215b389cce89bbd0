"""The speed candidates issue 17 lists, each measured against the claim as it is.

The issue asks for cuts to be measured before they are taken. This benchmark
takes the database side of the guard alone: every message is one transaction
on a raw psycopg connection (no SQLAlchemy, no inboxguard Python), with the
inbox benchmark's handler (an UPDATE of an account and an INSERT into a
ledger) after the claim. The claims are the package's own statements,
compiled by its PostgreSQL dialect, except the ones it does not ship, which
are written here. So a ratio below says what a candidate changes in the
statements and round trips, and nothing else.

Variants, each on its own tables, each run fresh and then as duplicates
(the same IDs again):

- ``now``: the claim the guard sends (``lock_timeout`` bound on);
- ``before``: the claim until 2026-12-01, which read the caller's setting in
  a ``MATERIALIZED`` CTE and had a third branch to put it back after a lost
  race;
- ``no lock bound``: the claim of ``Inbox(..., lock_timeout=None)``;
- ``split``: ``INSERT ... RETURNING`` alone, then the stored row's read only
  when nothing was inserted (a duplicate pays one more round trip);
- ``no expiry index``: today's claim on an inbox without the index on
  ``expires_at`` (the index the purge reads);
- ``no prepared statements``: psycopg's automatic server-side prepared
  statements off (``prepare_threshold=None``);
- ``evidence row``: the inbox row alone, as a plain ``INSERT ... VALUES ...
  ON CONFLICT DO NOTHING`` of its six columns into the same table (no
  ``RETURNING``, no lock bound, no read of a stored row), fresh judged by the
  row count: what recording the evidence costs before any claim logic;
- ``floor``: the one-column ``INSERT ... ON CONFLICT DO NOTHING`` the inbox
  benchmark's floor adds;
- ``five binds``: today's claim without the ``result_expires_at`` bind (the
  column left to its default, NULL), one bind fewer;
- the guard's boundary and its cuts (``guard``, ``guard: ...``): the claim
  with the savepoint the guard opens around it, see
  :mod:`benchmarks._candidates_boundary`.

Every claim writes ``result_expires_at`` as NULL, as the guard does for an
inbox without a ``result_ttl`` (the inbox benchmark's), so the partial index
on it is not written.

Two fresh-only variants store a small result, as the adapters and the peers
comparison do: ``store`` (the UPDATE, then COMMIT) and ``store pipelined``
(both sent together in psycopg's pipeline mode). The payload digest is timed
in a loop of its own: the most a faster encoder (orjson, say) could save.

A round runs the variants message by message, each message of every variant
in an order shuffled afresh for every message, so all see the same moment of
a shared machine and none always follows the same neighbour; ratios are
taken within a round, median (min-max). Run with ``python -m benchmarks
candidates``; ``BENCH_MESSAGES`` (default 1500) sizes a round.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import sys
import time
import timeit
import uuid
from typing import Any

import psycopg
from sqlalchemy import create_engine, text
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg

from benchmarks import _harness
from benchmarks._candidates_boundary import (
    BOUNDARY,
    ONE_QUERY,
    OWN_BEGIN,
    WITH_CLAIM,
    boundary_message,
)
from benchmarks._harness import Load
from benchmarks._report import table, write_section
from inboxguard import Inbox
from inboxguard._core.digest import digest_of
from inboxguard.inbox._settings import DEFAULT_LOCK_TIMEOUT
from inboxguard.sql.dialects.postgresql import PostgresqlInbox
from inboxguard.sql.direct import DirectSelect
from inboxguard.sql.tables import inbox_tables

PG_ADMIN = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
MESSAGES = int(os.environ.get("BENCH_MESSAGES", "1500"))
WARMUP = 200
CONSUMER = "billing.transfers"
CLAIMS = (
    "now",
    "before",
    "no lock bound",
    "split",
    "no expiry index",
    "no prepared statements",
    "evidence row",
    "floor",
    "five binds",
    *BOUNDARY,
)
STORES = ("store", "store pipelined")
VARIANTS = CLAIMS + STORES
RESULT = '{"ledger_id":12345,"status":"applied"}'
METHOD = """\
The database side of the guard alone, to measure each cut considered for the
claim before taking it: every message is one transaction on a raw psycopg
connection (no SQLAlchemy, no inboxguard Python) with the inbox benchmark's
handler (an UPDATE and an INSERT) after the claim. `now` is the claim the
package sends, compiled by its PostgreSQL dialect; `before` is the claim
until 2026-12-01 (the caller's `lock_timeout` read in a `MATERIALIZED` CTE,
and a third branch to put it back after a lost race); `no lock bound` is the
claim of `Inbox(..., lock_timeout=None)`; `split` (not shipped) sends
`INSERT ... RETURNING` alone and reads the stored row only when nothing was
inserted; `no expiry index` drops the index the purge reads; `no prepared
statements` turns psycopg's automatic server-side prepared statements off;
`evidence row` inserts the inbox row's six columns into the same table with
a plain `INSERT ... VALUES ... ON CONFLICT DO NOTHING` (no `RETURNING`, no
lock bound, no read of a stored row, so its duplicate does less than a
claim's); `floor` is the inbox benchmark's one-column `INSERT ... ON CONFLICT
DO NOTHING`; `five binds` is `now` without the `result_expires_at` bind (the
column left to its default). The `guard` variants add the savepoint the
guard runs the claim and the block in (issue 31): `guard` sends `SAVEPOINT`,
the claim, the handler, `RELEASE`, `COMMIT`, each its own round trip;
`savepoint pipelined` sends the `SAVEPOINT` with the claim in one round trip
(psycopg's pipeline mode); `release with commit` sends the `RELEASE` with
the `COMMIT` (a failed release aborts the transaction, so the `COMMIT`
behind it rolls back); `both pipelined` takes both cuts; `xid check with
commit` opens no savepoint (an adapter that began the transaction rolls all
of it back on failure) and checks at the exit, in the `COMMIT`'s round trip,
that the transaction's id is the one read with the claim (a statement that
fails otherwise, turning the `COMMIT` into a rollback). Every claim writes
`result_expires_at` as NULL, as the guard
does for an inbox without a `result_ttl`. Each variant has its own tables
and runs its commands fresh, then again as duplicates. The two result-store
variants claim as `now` does and store a small result after the handler: the
UPDATE then the COMMIT, or both sent together in psycopg's pipeline mode. A
round runs the variants message by message (every variant's next message in
turn, in an order shuffled afresh for every message), so each sees the same
moment of the shared machine and none always follows the same neighbour:
with an order only rotated per round, a variant sent right after the
pipelined store came out 15 % slow."""

#: The claim until 2026-12-01 (lock bound on): the caller's ``lock_timeout`` read
#: in a materialized CTE, and a third branch to put it back after a lost race.
BEFORE = (
    "WITH prev AS MATERIALIZED (SELECT current_setting('lock_timeout') AS v),"
    " claimed AS (INSERT INTO {inbox} (consumer, command_id, digest, processed_at,"
    " expires_at, result_expires_at) SELECT %(consumer)s, %(command_id)s, %(digest)s,"
    " %(processed_at)s, %(expires_at)s, %(result_expires_at)s"
    " FROM prev WHERE set_config('lock_timeout', '{millis}', true) IS NOT NULL"
    " ON CONFLICT (consumer, command_id) DO NOTHING RETURNING digest)"
    " SELECT digest, NULL AS result, NULL AS result_expires_at, true AS fresh,"
    " set_config('lock_timeout', (SELECT v FROM prev), true) AS restored FROM claimed"
    " UNION ALL SELECT digest, result, result_expires_at, false,"
    " set_config('lock_timeout', (SELECT v FROM prev), true) FROM {inbox}"
    " WHERE consumer = %(consumer)s AND command_id = %(command_id)s"
    " AND NOT EXISTS (SELECT 1 FROM claimed)"
    " UNION ALL SELECT NULL, NULL, NULL, NULL,"
    " set_config('lock_timeout', (SELECT v FROM prev), true)"
    " WHERE NOT EXISTS (SELECT 1 FROM claimed) AND NOT EXISTS (SELECT 1 FROM {inbox}"
    " WHERE consumer = %(consumer)s AND command_id = %(command_id)s)"
)
#: The split claim (not shipped): the insert alone, the caller's setting kept
#: and put back as today's claim does; a conflict is followed by the package's
#: read of the stored row.
SPLIT = (
    "INSERT INTO {inbox} (consumer, command_id, digest, processed_at, expires_at,"
    " result_expires_at) SELECT %(consumer)s, %(command_id)s, %(digest)s, %(processed_at)s,"
    " %(expires_at)s, %(result_expires_at)s"
    " WHERE set_config('lock_timeout', '{millis}' || left(set_config('inboxguard.lock_timeout',"
    " current_setting('lock_timeout'), true), 0), true) IS NOT NULL"
    " ON CONFLICT (consumer, command_id) DO NOTHING RETURNING digest,"
    " set_config('lock_timeout', current_setting('inboxguard.lock_timeout'), true)"
)


def _package_sql(prefix: str, lock_timeout: dt.timedelta | None) -> tuple[str, str]:
    """The claim and the stored row's read the package sends on psycopg."""
    dialect = PostgresqlInbox(inbox_tables(prefix), lock_timeout)
    compiled = PGDialect_psycopg()  # type: ignore[no-untyped-call]
    out = []
    for statement in (dialect._claim_stmt, dialect._stored_stmt):  # noqa: SLF001
        assert isinstance(statement, DirectSelect)
        out.append(statement.forms(compiled).sql)
    return out[0], out[1]


class Variant:
    """One variant's connection, statements and tables."""

    def __init__(self, dsn: str, name: str, prefix: str) -> None:
        self.name = name
        self.prefix = prefix
        prepare = {} if name != "no prepared statements" else {"prepare_threshold": None}
        self.conn: psycopg.Connection[Any] = psycopg.connect(dsn, **prepare)  # type: ignore[arg-type]
        self.conn.autocommit = name in OWN_BEGIN  # it sends its own BEGIN
        inbox = f"{prefix}inbox"
        millis = int(DEFAULT_LOCK_TIMEOUT.total_seconds() * 1000)
        lock = None if name == "no lock bound" else DEFAULT_LOCK_TIMEOUT
        self.claim, self.stored = _package_sql(prefix, lock)
        if name == "five binds":  # result_expires_at left to its column default (NULL)
            self.claim = self.claim.replace(" expires_at, result_expires_at)", " expires_at)")
            self.claim = re.sub(r", %\(result_expires_at\)s::[A-Z ]+ WHERE", " WHERE", self.claim)
            assert "result_expires_at)s" not in self.claim, self.claim
        self.before = BEFORE.replace("{inbox}", inbox).replace("{millis}", str(millis))
        self.split = SPLIT.replace("{inbox}", inbox).replace("{millis}", str(millis))
        self.row = (
            f"INSERT INTO {inbox} (consumer, command_id, digest, processed_at, expires_at,"
            " result_expires_at) VALUES (%(consumer)s, %(command_id)s, %(digest)s,"
            " %(processed_at)s, %(expires_at)s, %(result_expires_at)s)"
            " ON CONFLICT (consumer, command_id) DO NOTHING"
        )
        self.floor = f"INSERT INTO {prefix}floor (command_id) VALUES (%(command_id)s)" + (
            " ON CONFLICT DO NOTHING"
        )
        self.store = (
            f"UPDATE {inbox} SET result = %(result)s"
            " WHERE consumer = %(consumer)s AND command_id = %(command_id)s"
        )
        self.update = f"UPDATE {prefix}accounts SET balance = balance + 1 WHERE id = 1"
        self.ledger = f"INSERT INTO {prefix}ledger (command_id, amount) VALUES (%(command_id)s, 1)"

    def claim_once(self, cur: psycopg.Cursor[Any], params: dict[str, Any]) -> bool:
        """Claim one command as the package's dialect does; True when it is fresh."""
        if self.name in ("floor", "evidence row"):
            cur.execute(self.floor if self.name == "floor" else self.row, params)
            return cur.rowcount == 1
        first = {"split": self.split, "before": self.before}.get(self.name, self.claim)
        cur.execute(first, params)
        row = cur.fetchone()
        if row is not None and (self.name == "split" or row[3] is not None):
            return self.name == "split" or bool(row[3])
        cur.execute(self.stored, params)  # a conflict (split) or a lost race
        cur.fetchone()
        return False

    def params(self, cid: str) -> dict[str, Any]:
        now = dt.datetime.now(dt.UTC)
        return {
            "consumer": CONSUMER,
            "command_id": cid,
            "digest": "d" * 64,
            "processed_at": now,
            "expires_at": now + dt.timedelta(days=1),
            "result_expires_at": None,  # no result_ttl, as in the inbox benchmark
            "result": RESULT,
        }

    def message(self, params: dict[str, Any], *, result: bool = False) -> float:
        """Seconds for one message: claim, the handler when fresh, (the result,) commit."""
        if self.name in BOUNDARY:
            return boundary_message(self, params)
        conn = self.conn
        start = time.perf_counter()
        with conn.cursor() as cur:
            if self.claim_once(cur, params):
                cur.execute(self.update)
                cur.execute(self.ledger, params)
                if result and self.name == "store pipelined":
                    with conn.pipeline():
                        cur.execute(self.store, params)
                        conn.commit()
                    return time.perf_counter() - start
                if result:
                    cur.execute(self.store, params)
            conn.commit()
        return time.perf_counter() - start


def _schema(url: str, prefixes: dict[str, str]) -> None:
    engine = create_engine(url)
    for name, prefix in prefixes.items():
        Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix).create_schema()
        with engine.begin() as conn:
            if name == "no expiry index":
                conn.execute(text(f"DROP INDEX ix_{prefix}inbox_expires_at"))
            conn.execute(text(f"CREATE TABLE {prefix}floor (command_id VARCHAR(255) PRIMARY KEY)"))
            conn.execute(text(f"CREATE TABLE {prefix}accounts (id INT PRIMARY KEY, balance INT)"))
            conn.execute(text(f"INSERT INTO {prefix}accounts VALUES (1, 0)"))
            conn.execute(
                text(
                    f"CREATE TABLE {prefix}ledger (id SERIAL PRIMARY KEY,"
                    " command_id VARCHAR(255), amount INT)"
                )
            )
    engine.dispose()


def _round(variants: dict[str, Variant], order: list[str], i: int) -> dict[str, float]:
    """Message by message, every variant in turn, in an order shuffled afresh
    for each message (seeded by the round): fresh, then the claim variants
    again on the same IDs as duplicates. Seconds per message."""
    spent = dict.fromkeys([*order, *(f"{name} duplicate" for name in CLAIMS)], 0.0)
    ids = [f"r{i}-{n}" for n in range(MESSAGES)]
    # A fresh order for every message: a rotation once put `now` right after
    # `store pipelined` in every message, and `now` came out 15 % slow.
    for cid, message_order in zip(ids, _harness.shuffled_orders(order, MESSAGES, i), strict=True):
        for name in message_order:
            v = variants[name]
            spent[name] += v.message(v.params(cid), result=name in STORES)
    claims = [name for name in order if name in CLAIMS]
    for cid, dup_order in zip(ids, _harness.shuffled_orders(claims, MESSAGES, i), strict=True):
        for name in dup_order:
            v = variants[name]
            spent[f"{name} duplicate"] += v.message(v.params(cid))
    return {name: total / MESSAGES for name, total in spent.items()}


def _digest_seconds() -> float:
    payload = {"id": "cmd-1", "account": "acc-42", "amount": 1250, "currency": "EUR", "note": "x"}
    n = 20_000
    return min(timeit.repeat(lambda: digest_of(payload), number=n, repeat=5)) / n


def main() -> None:
    """Measure each candidate against today's claim on PostgreSQL."""
    sys.path.insert(0, os.getcwd())
    n_rounds = _harness.rounds()
    load = Load()
    db = f"bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(f"{PG_ADMIN}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{db}"'))
    prefixes = {name: f"c{k}_" for k, name in enumerate(VARIANTS)}
    variants: dict[str, Variant] = {}
    try:
        _schema(f"{PG_ADMIN}/{db}", prefixes)
        dsn = f"{PG_ADMIN.replace('postgresql+psycopg', 'postgresql')}/{db}"
        variants = {name: Variant(dsn, name, prefix) for name, prefix in prefixes.items()}
        for name, v in variants.items():
            for k in range(2 * WARMUP):
                v.message(v.params(f"warm-{k % WARMUP}"), result=name in STORES)
        rounds = _harness.run_rounds(
            VARIANTS, lambda order, i: _round(variants, order, i), n_rounds
        )
        digest = _digest_seconds()
    finally:
        for v in variants.values():
            v.conn.close()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()
    load.stop()
    _publish(rounds, digest, load, n_rounds)


#: The inbox benchmark's target for the guard against the evidence row.
EVIDENCE_BOUND = 1.10


def _cheapest(rounds: list[dict[str, float]]) -> tuple[str, _harness.Ratio]:
    """The boundary variant (each keeps G17-G24) cheapest against the evidence row."""
    ratios = {name: _harness.ratio(rounds, name, "evidence row") for name in BOUNDARY}
    name = min(ratios, key=lambda n: ratios[n].median)
    return name, ratios[name]


def _bound(rounds: list[dict[str, float]], name: str, least: _harness.Ratio) -> _harness.Target:
    """The database side of the guard, its cheapest boundary, against the
    evidence row: with no inboxguard Python at all, the least the inbox
    benchmark's guard / evidence row can be; missed, that target is out of
    reach by design. ``name`` and ``least`` are :func:`_cheapest`'s answer."""
    return _harness.Target(
        "candidates",
        "database side of the guard (claim and savepoint, no inboxguard Python),"
        " its cheapest boundary / evidence row",
        EVIDENCE_BOUND,
        "lower",
        least,
        note=(
            f"`{name}`; the least `inbox`'s guard / evidence row can be (the claim alone,"
            f" no savepoint: {_harness.ratio(rounds, 'now', 'evidence row')})"
        ),
    )


def _us(rounds: list[dict[str, float]], key: str) -> str:
    return f"{_harness.median(rounds, key) * 1e6:.0f}"


def _publish(rounds: list[dict[str, float]], digest: float, load: Load, n_rounds: int) -> None:
    rows: list[list[object]] = []
    for name in CLAIMS:
        dup = f"{name} duplicate"
        rows.append(
            [
                f"`{name}`",
                _us(rounds, name),
                "1.00" if name == "now" else _harness.ratio(rounds, name, "now"),
                _harness.ratio(rounds, name, "evidence row"),
                _us(rounds, dup),
                "1.00" if name == "now" else _harness.ratio(rounds, dup, "now duplicate"),
            ]
        )
    claim_table = table(
        [
            "claim",
            "fresh µs a message",
            "fresh: this / `now`",
            "fresh: this / `evidence row`",
            "duplicate µs a message",
            "duplicate: this / `now`",
        ],
        rows,
    )
    cuts = "; ".join(
        f"`{name}` {_harness.ratio(rounds, name, 'guard')} fresh,"
        f" {_harness.ratio(rounds, f'{name} duplicate', 'guard duplicate')} duplicate"
        for name in BOUNDARY[1:]
    )
    store_table = table(
        ["result store", "fresh µs a message", "this / `store`"],
        [
            ["`store` (UPDATE, then COMMIT)", _us(rounds, "store"), "1.00"],
            [
                "`store pipelined` (UPDATE and COMMIT in one pipeline)",
                _us(rounds, "store pipelined"),
                _harness.ratio(rounds, "store pipelined", "store"),
            ],
        ],
    )
    now_floor = _harness.ratio(rounds, "now", "floor")
    split_floor = _harness.ratio(rounds, "split", "floor")
    before_floor = _harness.ratio(rounds, "before", "floor")
    row_floor = _harness.ratio(rounds, "evidence row", "floor")
    fresh_now = _harness.median(rounds, "now")
    now_row = _harness.ratio(rounds, "now", "evidence row")
    guard_row = _harness.ratio(rounds, "guard", "evidence row")
    shared_row = _harness.ratio(rounds, ONE_QUERY, "evidence row")
    shipped_row = _harness.ratio(rounds, WITH_CLAIM, "evidence row")
    cheapest, least = _cheapest(rounds)
    body = f"""
{METHOD}

{MESSAGES:,} messages a variant a pass, {n_rounds} rounds; µs are medians over
the rounds, ratios the median of per-round ratios (min-max).

{claim_table}

{store_table}

The floor the targets count from is the evidence row (issue 37): the guard
within 1.10 of it. With no inboxguard Python at all, the claim the package
sends costs {now_row} of the evidence row; with the guard's savepoint around
it, each boundary statement a round trip of its own (`guard`, what a guarded
message sent until 2026-12-02, and still sends on other drivers), {guard_row};
with the savepoint sent with the `BEGIN` and the release with the `COMMIT`
(`{ONE_QUERY}`, what a guarded message sent on psycopg from G32 until G35),
{shared_row}; with the claim in the same round trip as the `BEGIN` and the
savepoint too (`{WITH_CLAIM}`, one libpq pipeline, what a guarded message sends
on psycopg since G35), {shipped_row}, one round trip fewer than the evidence
row's transaction (whose `BEGIN` psycopg sends alone). Sent here from raw
psycopg, that pipeline's own client cost outweighs the round trip it saves on
this 2-core machine; inside the package the inbox benchmark's `unpipelined`
mode times the same cut end to end. The cheapest boundary here is
`{cheapest}`, {least} of the evidence row (recorded as the bound of the
inbox benchmark's target: with no inboxguard Python at all, the guard
cannot come closer to the row than that), and the claim alone, with no
savepoint, is {now_row}; against the one-column floor, the claim costs {now_floor}, the
claim sent until 2026-12-01 {before_floor}, the split claim {split_floor}
and the evidence row itself {row_floor}. The cuts of the boundary, each
against `guard`: {cuts}.
The payload digest, timed alone, takes {digest * 1e6:.1f} µs, {digest / fresh_now:.1%}
of a fresh message here: the most any faster encoder could save.
"""
    print(body)
    _harness.record("candidates", [_bound(rounds, cheapest, least)], load, n_rounds)
    write_section(
        "candidates",
        "Speed candidates against today's claim",
        body,
        load=load,
        rounds=n_rounds,
    )


if __name__ == "__main__":
    main()
