"""L7 with real processes on PostgreSQL: a kill after accept, concurrent
workers, and a lease expiring under a running worker. The gateway's request
log and charges are tables, so counts hold across processes."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from inboxguard import EffectLedger, EffectState
from inboxguard.effects import EffectRecord
from integrations.ledger.gateway import FileClock, SandboxGateway
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("effect_worker.py")
KEY = "invoice-99/charge"
T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)

pytestmark = pytest.mark.e2e


class Rig:
    """A ledger and a gateway on one PostgreSQL database, and worker processes."""

    def __init__(self, engine: Engine, url: str, prefix: str, tmp: Path, lookup: bool) -> None:
        self.url, self.prefix, self.tmp, self.lookup = url, prefix, tmp, lookup
        self.clock = FileClock(tmp / "clock")
        self.ledger = EffectLedger(engine, table_prefix=prefix, clock=self.clock)
        self.gateway = SandboxGateway(
            engine, table_prefix=prefix, supports_lookup=lookup, clock=self.clock
        )
        self.ledger.create_schema()
        self.gateway.create_schema()
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, *extra: str) -> subprocess.Popen[str]:
        cmd = [sys.executable, str(WORKER), "--url", self.url, "--prefix", self.prefix]
        cmd += ["--key", KEY, "--clock-file", str(self.clock.path), *extra]
        if self.lookup:
            cmd.append("--lookup")
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self.procs.append(proc)
        return proc

    def result(self, proc: subprocess.Popen[str]) -> dict[str, str]:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err[-3000:]
        return dict(json.loads(out.strip().splitlines()[-1]))

    def record(self) -> EffectRecord:
        record = self.ledger.get(KEY)
        assert record is not None
        return record

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.gateway.drop_schema()
        self.ledger.drop_schema()


@pytest.fixture(params=["lookup", "no-lookup"])
def rig(request: pytest.FixtureRequest, pg_url: str, prefix: str, tmp_path: Path) -> Iterator[Rig]:
    engine = create_engine(pg_url)
    r = Rig(engine, pg_url, prefix, tmp_path, lookup=request.param == "lookup")
    try:
        yield r
    finally:
        r.close()
        engine.dispose()


def receipts(record: EffectRecord) -> int:
    return sum(1 for t in record.history if t.event in {"confirm", "reconcile"})


def test_l07_processes_case1_killed_after_accept(rig: Rig) -> None:
    """The first process dies right after the gateway charged; a second one,
    after the lease, confirms the same charge."""
    rig.clock.set(T0)
    dead = rig.start("--kill-after-apply")
    dead.communicate(timeout=60)
    assert dead.returncode == 137
    assert (rig.record().state, rig.record().version) == (EffectState.PREPARED, 1)
    assert rig.gateway.charges() == 1
    rig.clock.set(T0 + dt.timedelta(minutes=1))
    assert rig.result(rig.start()) == {"result": "ch_1"}
    record = rig.record()
    assert record.state is EffectState.CONFIRMED
    assert record.version == (3 if rig.lookup else 4)
    assert rig.gateway.requests() == (1 if rig.lookup else 2)
    assert rig.gateway.charges() == 1
    assert receipts(record) == 1


@pytest.mark.parametrize("rig", ["lookup"], indirect=True)  # no lookup is reached here
def test_l07_processes_case2_concurrent_workers_one_call(rig: Rig) -> None:
    """Three processes start together; the one that sends stalls after the
    charge until the other two have each been turned away; then all three
    answer with the same receipt."""
    go, hold = rig.tmp / "go", rig.tmp / "hold"
    statuses = [rig.tmp / f"status{i}" for i in range(3)]
    procs = [
        rig.start(
            "--go-file",
            str(go),
            "--hold-file",
            str(hold),
            "--status-file",
            str(status),
            "--retry-for",
            "60",
        )
        for status in statuses
    ]
    go.touch()
    wait_until(lambda: rig.gateway.requests() == 1, 60)
    wait_until(lambda: sum(s.exists() for s in statuses) == 2, 60)
    hold.touch()
    results = [rig.result(proc) for proc in procs]
    assert results == [{"result": "ch_1"}] * 3
    record = rig.record()
    assert (record.state, record.version, record.attempts) == (EffectState.CONFIRMED, 2, 1)
    assert (rig.gateway.requests(), rig.gateway.requests("lookup"), rig.gateway.charges()) == (
        1,
        0,
        1,
    )
    assert receipts(record) == 1


def test_l07_processes_case3_lease_expires_under_a_running_worker(rig: Rig) -> None:
    """Process A stalls after the charge; its lease expires; process B takes
    over and records the outcome; A's late completion is refused as stale."""
    rig.clock.set(T0)
    hold = rig.tmp / "hold"
    slow = rig.start("--hold-file", str(hold))
    wait_until(lambda: rig.gateway.requests() == 1, 60)
    rig.clock.set(T0 + dt.timedelta(minutes=1))
    assert rig.result(rig.start()) == {"result": "ch_1"}
    hold.touch()
    assert rig.result(slow) == {"error": "StaleLeaseError"}
    record = rig.record()
    assert (record.state, record.fencing_token) == (EffectState.CONFIRMED, 2)
    assert record.version == (3 if rig.lookup else 4)
    assert rig.gateway.charges() == 1
    assert receipts(record) == 1
