"""L10 on Celery: ``billing.charge_invoice`` (integrations/ledger/celery_charges.py)
in a real ``celery worker`` (prefork), on Redis and PostgreSQL.

Twenty invoices, each command sent twice with new task ids; the gateway loses
answers and times out; a worker child dies right after the gateway's fifth
charge (the parent requeues its message). Every invoice ends up charged once at
the gateway and paid once, with the ledger's receipt.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import redis
from sqlalchemy import create_engine

from integrations.celery import business
from integrations.celery.settings import Settings, create_app
from integrations.ledger import billing
from tests.conftest import REDIS_URL, require_service, unique
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]
INVOICES = 20

pytestmark = pytest.mark.e2e


def test_l10_celery_task_charges_each_invoice_once(pg_url: str, tmp_path: Path) -> None:
    require_service("redis")
    queue = unique("lc")
    settings = Settings(
        db_url=pg_url,
        broker_url=REDIS_URL,
        table_prefix=unique("lc") + "_",
        queue=queue,
        redis_keyprefix=f"{queue}:",
    )
    engine = create_engine(pg_url)
    business.create_schema(engine, settings.table_prefix, settings.retention)
    billing.create_schema(engine, settings.table_prefix, INVOICES)
    ledger, gateway, _ = billing.parts(engine, settings.table_prefix)
    marker = tmp_path / "killed"
    env = {
        **os.environ,
        **settings.env(),
        "PYTHONPATH": str(ROOT),
        "INBOXGUARD_LEDGER_CHAOS": "3",
        "INBOXGUARD_LEDGER_KILL_AFTER": "5",
        "INBOXGUARD_LEDGER_KILL_ONCE": str(marker),
        "INBOXGUARD_LEDGER_LEASE_S": "2",
    }
    cmd = [
        sys.executable, "-m", "celery", "-A", "integrations.ledger.celery_app", "worker",
        "-Q", queue, "--pool=prefork", "-c", "2", "--loglevel=INFO", "-n", f"{queue}@%h",
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]  # fmt: skip
    log = tmp_path / "worker.log"
    app = create_app(settings, include_tasks=False)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_until(lambda: " ready." in log.read_text(errors="replace"), 60)
        for _ in range(2):
            for i in range(INVOICES):
                app.send_task(
                    billing.CELERY_TASK,
                    kwargs=billing.charge_kwargs(i, 100 + i),
                    task_id=str(uuid.uuid4()),
                    queue=queue,
                )
        wait_until(lambda: billing.unpaid(engine, settings.table_prefix) == 0, 90)
        assert marker.exists()  # a child really died after a charge
        paid = billing.paid(engine, settings.table_prefix)
        assert {times for _, times in paid.values()} == {1}
        assert gateway.charges() == INVOICES
        for invoice, (charge, _) in paid.items():
            record = ledger.get(f"invoice-{invoice}/charge")
            assert record is not None
            assert record.receipt is not None
            assert record.receipt.reference == charge
            assert str(record.state) in {"confirmed", "reconciled"}
        events = [
            t.event
            for i in range(INVOICES)
            for t in (ledger.get(f"invoice-{i}/charge") or pytest.fail("missing")).history
        ]
        assert events.count("unknown") > 0
        assert events.count("takeover") > 0
    finally:
        # SIGKILL: the test is over and judges nothing by the worker's shutdown
        # (a warm one took seconds).
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        app.close()
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=f"{queue}:*"))
        if keys:
            client.delete(*keys)
        billing.drop_schema(engine, settings.table_prefix)
        business.drop_schema(engine, settings.table_prefix, settings.retention)
        engine.dispose()
