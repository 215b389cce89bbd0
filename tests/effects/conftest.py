"""Fixtures of the ledger tests: a ledger, a sandbox gateway and one clock for both."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy.engine import Engine

from inboxguard import EffectLedger
from inboxguard.testing import Crash, FaultPoint, crash_at
from integrations.ledger.gateway import SandboxGateway
from tests.conftest import FakeClock

#: The lease every test uses; clocks jump past it to expire one.
LEASE = dt.timedelta(seconds=30)
#: The sandbox gateway's idempotency window.
WINDOW = dt.timedelta(hours=24)


#: The worker process dies: the kit's crash, which handler code cannot swallow.
Killed = Crash


@contextmanager
def dies_after_charge(gw: SandboxGateway) -> Iterator[None]:
    """Kill the worker right after ``gw`` accepts a charge, as ``kill -9`` would.

    The kit's fault point between the provider's answer and the ledger's
    record raises :class:`Killed` once: the dead worker records nothing more,
    so the effect stays ``prepared`` under its lease. (A call that settles by
    lookup sends nothing and so does not die.)
    """
    with crash_at(FaultPoint.PROVIDER_ACCEPTED):
        yield


@pytest.fixture
def ledger(engine: Engine, prefix: str, clock: FakeClock) -> Iterator[EffectLedger]:
    """A ledger with its own tables on each database, on the test's clock."""
    book = EffectLedger(engine, table_prefix=prefix, clock=clock, actor="test")
    book.create_schema()
    yield book
    book.drop_schema()


def _gateway(engine: Engine, prefix: str, clock: FakeClock, lookup: bool) -> SandboxGateway:
    gw = SandboxGateway(
        engine, table_prefix=prefix, window=WINDOW, supports_lookup=lookup, clock=clock
    )
    gw.create_schema()
    return gw


@pytest.fixture
def gateway(engine: Engine, prefix: str, clock: FakeClock) -> Iterator[SandboxGateway]:
    """A gateway with lookup, forgetting keys after 24 hours."""
    gw = _gateway(engine, prefix, clock, lookup=True)
    yield gw
    gw.drop_schema()


@pytest.fixture
def blind_gateway(engine: Engine, prefix: str, clock: FakeClock) -> Iterator[SandboxGateway]:
    """The same gateway without a lookup."""
    gw = _gateway(engine, prefix + "b", clock, lookup=False)
    yield gw
    gw.drop_schema()


@pytest.fixture(params=["lookup", "no-lookup"])
def any_gateway(
    request: pytest.FixtureRequest, engine: Engine, prefix: str, clock: FakeClock
) -> Iterator[SandboxGateway]:
    """The gateway with, then without, a lookup."""
    gw = _gateway(engine, prefix, clock, lookup=request.param == "lookup")
    yield gw
    gw.drop_schema()
