"""The stress run's small configuration, in ``make test``.

``benchmarks/stress.py`` runs as it does for the published figures: a real
process tree (4 kombu worker processes on RabbitMQ and PostgreSQL), real
SIGKILLs of consuming workers, 3,000 messages of which 30 % are re-sends and
1 % carry a known command ID with another payload. The test then looks at the
outcome itself (ledger, quarantine, dead-letter queue, work queue) rather
than trusting the script's verdict, and shows that the script's checks fail
on a ledger that applied a command twice and lost another.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, delete, func, insert, select

import inboxguard
from benchmarks._stress_checks import Names, dead_depth, make_plan, queue_state, verify
from benchmarks._stress_worker import CONSUMER, RETENTION, business_tables
from benchmarks.stress import cleanup
from tests.conftest import require_service

pytestmark = [pytest.mark.stress, pytest.mark.e2e, pytest.mark.postgresql, pytest.mark.rabbitmq]

ROOT = Path(__file__).resolve().parents[2]
#: The small configuration: the full run is 16 workers and 200,000 messages.
WORKERS, MESSAGES, DUPLICATES, MISMATCHES, SEED, ACCOUNTS = 4, 3000, 0.30, 0.01, 5, 50
SMALL = [
    "--workers", str(WORKERS), "--commands", str(MESSAGES),
    "--duplicates", str(DUPLICATES), "--mismatches", str(MISMATCHES),
    "--seed", str(SEED), "--accounts", str(ACCOUNTS),
    "--kill-interval", "0.3", "--deadline", "45", "--progress-every", "5",
]  # fmt: skip


@pytest.fixture(scope="module")
def stress_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One run of the small configuration, its database and queues kept for
    the tests to look at, then dropped."""
    require_service("postgresql")
    require_service("rabbitmq")
    out = tmp_path_factory.mktemp("stress") / "summary.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.stress", *SMALL, "--keep", "--json", str(out)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the script and its workers: one process group
    )
    try:
        stdout, stderr = proc.communicate(timeout=100)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
    assert out.exists(), f"no summary:\n{stdout[-3000:]}\n{stderr[-3000:]}"
    summary = json.loads(out.read_text())
    try:
        assert proc.returncode == 0, f"{stdout[-4000:]}\n{stderr[-3000:]}"
        yield summary
    finally:
        cleanup(Names(**summary["names"]), summary["database"])


def test_st1_every_command_applied_once_every_mismatch_quarantined_through_sigkills(
    stress_run: dict[str, Any],
) -> None:
    assert all(check["ok"] for check in stress_run["checks"]), stress_run["checks"]
    assert stress_run["kills"] >= 3, "the killer must have killed consuming workers"
    assert stress_run["unexpected_exits"] == []
    plan = make_plan(MESSAGES, DUPLICATES, MISMATCHES, ACCOUNTS, SEED)
    names = Names(**stress_run["names"])
    engine = create_engine(names.db_url)
    accounts, ledger = business_tables(names.prefix)
    try:
        with engine.connect() as conn:
            per_command = dict(
                conn.execute(
                    select(ledger.c.command_id, func.count()).group_by(ledger.c.command_id)
                ).all()
            )
            total = conn.scalar(select(func.sum(accounts.c.balance)))
        inbox = inboxguard.Inbox(engine, retention=RETENTION, table_prefix=names.prefix)
        held = inbox.quarantined(CONSUMER)
    finally:
        engine.dispose()
    assert set(per_command.values()) == {1}
    assert set(per_command) == {b["command_id"] for b in plan.bodies}
    assert total == sum(plan.balances.values())
    assert {r.command_id for r in held} == plan.mismatched
    assert {r.reason for r in held} == {inboxguard.QuarantineReason.PAYLOAD_MISMATCH}
    assert dead_depth(names.broker_url, names.queue) == len(plan.mismatched)
    assert queue_state(names.broker_url, names.queue) == (0, 0)


def test_st2_the_checks_fail_on_a_command_applied_twice_or_lost(
    stress_run: dict[str, Any],
) -> None:
    plan = make_plan(MESSAGES, DUPLICATES, MISMATCHES, ACCOUNTS, SEED)
    names = Names(**stress_run["names"])
    engine = create_engine(names.db_url)
    _, ledger = business_tables(names.prefix)
    twice, lost = sorted({b["command_id"] for b in plan.bodies} - plan.mismatched)[:2]
    with engine.begin() as conn:
        copy = conn.execute(select(ledger).where(ledger.c.command_id == twice)).one()._asdict()
        gone = conn.execute(select(ledger).where(ledger.c.command_id == lost)).one()._asdict()
        copy.pop("id")
        extra = conn.scalar(insert(ledger).values(copy).returning(ledger.c.id))
        conn.execute(delete(ledger).where(ledger.c.command_id == lost))
    try:
        [once, *_] = verify(plan, names, MESSAGES)
    finally:  # put the ledger back: the run's own test may come after this one
        with engine.begin() as conn:
            conn.execute(delete(ledger).where(ledger.c.id == extra))
            conn.execute(insert(ledger).values(gone))
        engine.dispose()
    assert not once.ok
    assert twice in once.detail
    assert lost in once.detail
