"""L10 on Dramatiq: ``charge_invoice`` (integrations/ledger/dramatiq_charges.py)
in real ``dramatiq`` worker processes, on Redis and PostgreSQL.

Twenty invoices, each command sent twice; the gateway loses answers and times
out; the first worker process is killed right after the gateway's fifth
charge. A second worker finishes the queue: every invoice charged once at the
gateway, paid once, with the ledger's receipt.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from integrations.dramatiq.brokers import make_broker
from integrations.dramatiq.model import create_schema, drop_schema
from integrations.dramatiq.settings import Settings
from integrations.ledger import billing as model
from tests.adapters.dramatiq.conftest import _delete_queues, pending
from tests.conftest import REDIS_URL, require_service, unique
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]
DRAMATIQ = str(Path(sys.executable).with_name("dramatiq"))
READY = "Worker process is ready for action."
INVOICES = 20

pytestmark = pytest.mark.e2e


class Worker:
    """``dramatiq integrations.ledger.dramatiq_charges`` with its own log."""

    def __init__(self, settings: Settings, log: Path, **env: str) -> None:
        self.log = log
        self._out = log.open("wb")
        args = [DRAMATIQ, "integrations.ledger.dramatiq_charges", "--processes", "1"]
        self.proc = subprocess.Popen(
            [*args, "--threads", "4", "--queues", settings.queue],
            cwd=ROOT,
            env={**os.environ, **settings.env(), "PYTHONPATH": str(ROOT), **env},
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self) -> None:
        wait_until(lambda: READY in self.text() or self.proc.poll() is not None, 60)
        assert READY in self.text(), self.text()[-3000:]

    def stop(self) -> None:
        # SIGKILL: the test is over and judges nothing by the worker's shutdown
        # (a graceful one took 2 s).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # the command and its worker processes
        self.proc.wait(timeout=10)
        self._out.close()


@pytest.fixture
def engine(pg_url: str) -> Iterator[Engine]:
    eng = create_engine(pg_url)
    yield eng
    eng.dispose()


def test_l10_dramatiq_actor_charges_each_invoice_once(
    engine: Engine, pg_url: str, tmp_path: Path
) -> None:
    require_service("redis")
    settings = Settings(
        db_url=pg_url,
        broker_url=REDIS_URL,
        results_url=REDIS_URL,
        prefix=unique("lq") + "_",
        queue=unique("q"),
        retention_days=45,
        guard=True,
        work_ms=0,
        ack_delay_ms=0,
        redis_heartbeat_ms=2000,  # a dead worker's messages come back promptly
    )
    create_schema(engine, settings.prefix)
    model.create_schema(engine, settings.prefix, INVOICES)
    ledger, gateway, _ = model.parts(engine, settings.prefix)
    broker = make_broker(settings.broker_url)
    workers: list[Worker] = []
    try:
        first = Worker(
            settings,
            tmp_path / "first.log",
            INBOXGUARD_LEDGER_CHAOS="3",
            INBOXGUARD_LEDGER_KILL_AFTER="5",
            INBOXGUARD_LEDGER_LEASE_S="2",
        )
        workers.append(first)
        first.wait_ready()
        for _ in range(2):
            for i in range(INVOICES):
                broker.enqueue(model.charge_message(settings.queue, i, 100 + i))
        wait_until(lambda: first.proc.poll() is not None, 60)  # killed after the 5th charge
        charged_at_kill = gateway.charges()
        assert 5 <= charged_at_kill < INVOICES
        assert model.unpaid(engine, settings.prefix) > 0

        second = Worker(
            settings,
            tmp_path / "second.log",
            INBOXGUARD_LEDGER_CHAOS="4",
            INBOXGUARD_LEDGER_LEASE_S="2",
        )
        workers.append(second)
        second.wait_ready()
        wait_until(
            lambda: (
                model.unpaid(engine, settings.prefix) == 0 and pending(broker, settings.queue) == 0
            ),
            90,
        )
        paid = model.paid(engine, settings.prefix)
        assert {times for _, times in paid.values()} == {1}
        assert gateway.charges() == INVOICES
        receipts = {r.effect_key: r.receipt for r in ledger.effects(limit=1000)}
        assert len(receipts) == INVOICES
        for invoice, (charge, _) in paid.items():
            receipt = receipts[f"invoice-{invoice}/charge"]
            assert receipt is not None
            assert receipt.reference == charge
        states = {str(r.state) for r in ledger.effects(limit=1000)}
        assert states <= {"confirmed", "reconciled"}
        histories = [ledger.get(f"invoice-{i}/charge") for i in range(INVOICES)]
        events = [t.event for h in histories if h is not None for t in h.history]
        assert events.count("unknown") > 0  # lost answers and timeouts really happened
        assert events.count("takeover") > 0  # and were settled by a later attempt
    finally:
        for worker in workers:
            worker.stop()
        _delete_queues(broker, settings.queue)
        broker.close()
        model.drop_schema(engine, settings.prefix)
        drop_schema(engine, settings.prefix)
