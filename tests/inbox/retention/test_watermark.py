"""Domain watermarks: monotonic per (consumer, key), in the caller's transaction."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

import inboxguard
from tests.inbox.retention.watermark_worker import POSITIONS

WORKER = Path(__file__).with_name("watermark_worker.py")
PROCESSES = 4


def stored(inbox: inboxguard.Inbox, key: str = "cust-1") -> int | None:
    c = inbox.watermarks.c
    with inbox.engine.connect() as conn:
        return conn.execute(select(c.position).where(c.key == key)).scalar()


def advance(inbox: inboxguard.Inbox, position: int, key: str = "cust-1") -> bool:
    with inbox.engine.begin() as conn:
        return inbox.advance_watermark(conn, consumer="billing", key=key, position=position)


def test_watermark_advances_and_refuses_at_or_below(box: inboxguard.Inbox) -> None:
    assert advance(box, 202610) is True  # first cycle of this customer
    assert advance(box, 202610) is False  # the same cycle again: a duplicate
    assert advance(box, 202609) is False  # an older cycle: a duplicate
    assert advance(box, 202611) is True
    assert stored(box) == 202611
    assert advance(box, 5, key="cust-2") is True  # keys are independent
    assert stored(box) == 202611


def test_watermark_rolls_back_with_the_callers_transaction(box: inboxguard.Inbox) -> None:
    advance(box, 10)
    with box.engine.connect() as conn, conn.begin() as tx:
        assert box.advance_watermark(conn, consumer="billing", key="cust-1", position=11)
        tx.rollback()
    assert stored(box) == 10
    assert advance(box, 11) is True


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"position": "11"}, inboxguard.ConfigurationError),
        ({"position": True}, inboxguard.ConfigurationError),
        ({"position": 2**63}, inboxguard.ConfigurationError),
        ({"key": ""}, inboxguard.InvalidCommandError),
    ],
)
def test_bad_watermark_input_is_refused_and_writes_nothing(
    box: inboxguard.Inbox, kwargs: dict, error: type
) -> None:
    args = {"consumer": "billing", "key": "cust-1", "position": 1, **kwargs}
    with box.engine.begin() as conn, pytest.raises(error):
        box.advance_watermark(conn, **args)
    assert stored(box) is None


@pytest.mark.e2e
def test_concurrent_advances_from_processes_never_go_backwards(
    box: inboxguard.Inbox, db_url: str
) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), db_url, box.table_prefix, str(seed)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        for seed in range(PROCESSES)
    ]
    outputs = []
    try:
        for proc in procs:  # a barrier: every process connected and waiting
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready", proc.communicate(timeout=30)
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            out, err = proc.communicate(timeout=90)
            assert proc.returncode == 0, err
            outputs.append(json.loads(out))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    c = box.watermarks.c
    with box.engine.connect() as conn:
        final = conn.execute(select(c.position).where(c.key == "customer-1")).scalar_one()
    assert final == POSITIONS
    advanced = [p for out in outputs for p, ok in out["results"] if ok]
    assert len(advanced) == len(set(advanced))  # no position was "new" twice
    for out in outputs:
        assert out["seen"] == sorted(out["seen"])  # what each process read never went down
        for (position, _), seen in zip(out["results"], out["seen"], strict=True):
            assert seen >= position  # after any advance call, the mark covers the position
