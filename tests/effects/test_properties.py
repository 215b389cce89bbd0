"""L13: random sequences of failures never make a second charge (SQLite).

Hypothesis draws a run of steps against one effect: attempts whose provider
call succeeds, loses its answer, times out, drops the connection or kills the
worker after charging; clock jumps shorter than a lease, past a lease, or past
the provider's window; and reconcile passes. After every step: at most one
charge exists, a settled-as-applied effect returns that charge's receipt, the
history has one entry per version, and versions only grow.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from inboxguard import EffectLedger, EffectState, InboxGuardError
from integrations.ledger.gateway import SandboxGateway
from tests.conftest import FakeClock
from tests.effects.conftest import LEASE, WINDOW, Killed, dies_after_charge

ATTEMPTS = ["ok", "accept_then_timeout", "timeout", "connection_error", "kill"]
JUMPS = {"short": LEASE / 3, "lease": LEASE, "window": WINDOW}
STEPS = st.lists(
    st.one_of(
        st.sampled_from(ATTEMPTS).map(lambda b: ("attempt", b)),
        st.sampled_from(sorted(JUMPS)).map(lambda j: ("advance", j)),
        st.just(("reconcile", "")),
    ),
    min_size=1,
    max_size=12,
)
_counter = itertools.count()
# The crash points of the ledger's failure table, each followed by what can come
# next: a retry inside the lease, after it, after the window, and reconcile.
NAMED_RUNS = [
    [tuple(step.partition(":")[::2]) for step in run.split()]
    for run in (
        "attempt:kill advance:lease attempt:ok",
        "attempt:kill advance:short attempt:ok advance:lease attempt:ok",
        "attempt:kill advance:window reconcile: attempt:ok",
        "attempt:accept_then_timeout advance:window attempt:ok",
        "attempt:accept_then_timeout reconcile: advance:lease reconcile: attempt:ok",
        "attempt:timeout advance:lease attempt:timeout advance:window attempt:ok",
        "attempt:connection_error advance:short attempt:ok",
        "attempt:ok advance:window attempt:ok reconcile:",
    )
]


@pytest.fixture(scope="module")
def sqlite_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    engine = create_engine(f"sqlite:///{tmp_path_factory.mktemp('prop')}/p.db")
    yield engine
    engine.dispose()


@pytest.mark.parametrize("lookup", [True, False], ids=["lookup", "no-lookup"])
@settings(
    max_examples=100,
    deadline=None,
    derandomize=True,  # the same runs on every machine: a failure reproduces
    database=None,  # nothing written into the checkout
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=STEPS)
@example(steps=NAMED_RUNS[0])
@example(steps=NAMED_RUNS[1])
@example(steps=NAMED_RUNS[2])
@example(steps=NAMED_RUNS[3])
@example(steps=NAMED_RUNS[4])
@example(steps=NAMED_RUNS[5])
@example(steps=NAMED_RUNS[6])
@example(steps=NAMED_RUNS[7])
def test_l13_no_sequence_of_failures_charges_twice(
    sqlite_engine: Engine, lookup: bool, steps: list[tuple[str, str]]
) -> None:
    clock = FakeClock()
    prefix = f"p{next(_counter)}_"
    ledger = EffectLedger(sqlite_engine, table_prefix=prefix, clock=clock)
    ledger.create_schema()
    gw = SandboxGateway(sqlite_engine, table_prefix=prefix, supports_lookup=lookup, clock=clock)
    gw.create_schema()
    key, payload = "invoice-1/charge", {"amount": 10}
    last_version = 0
    try:
        for action, arg in steps:
            if action == "advance":
                clock.advance(JUMPS[arg])
            elif action == "reconcile":
                ledger.reconcile(gw, older_than=dt.timedelta(0), lease=LEASE)
            else:
                gw.script = ["ok" if arg == "kill" else arg]
                dies: AbstractContextManager[None] = (
                    dies_after_charge(gw) if arg == "kill" else nullcontext()
                )
                try:
                    with dies:
                        ledger.execute(key, gw, payload, lease=LEASE)
                except (InboxGuardError, Killed):
                    pass
            record = ledger.get(key)
            assert gw.charges() <= 1
            if record is None:
                continue
            assert len(record.history) == record.version >= last_version
            last_version = record.version
            if record.state in {EffectState.CONFIRMED, EffectState.RECONCILED} and record.applied:
                assert gw.charges() == 1
                assert record.receipt is not None
                assert record.receipt.reference == "ch_1"
    finally:
        gw.drop_schema()
        ledger.drop_schema()
