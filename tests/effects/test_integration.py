"""L10: the guarded consumer that charges through the ledger, as real processes.

Twenty invoices, each charge command delivered twice, a gateway that loses
responses and times out, and a worker killed right after the gateway's fifth
charge; a second worker run drains the queue. Every invoice is charged once at
the gateway and paid once locally, with the ledger's receipt.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INVOICES = 20

pytestmark = pytest.mark.e2e


def worker(url: str, prefix: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "integrations.ledger.worker", *args, "--db", url],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# PostgreSQL's "inside the guard" order runs in test_celery.py and test_dramatiq.py.
@pytest.mark.parametrize(("database", "lookup"), [("sqlite", False)], ids=["sqlite-no-lookup"])
def test_l10_guarded_consumer_charges_each_invoice_once(
    request: pytest.FixtureRequest, database: str, lookup: bool, prefix: str
) -> None:
    url = str(request.getfixturevalue("sqlite_url" if database == "sqlite" else "pg_url"))
    common = ["--prefix", prefix, "--lease-seconds", "1"] + ([] if lookup else ["--no-lookup"])
    produced = worker(url, prefix, "produce", "--invoices", str(INVOICES), *common)
    assert produced.returncode == 0, produced.stderr
    killed = worker(url, prefix, "run", "--chaos", "3", "--kill-after-charges", "5", *common)
    assert killed.returncode == 137, killed.stderr
    midway = json.loads(worker(url, prefix, "report", *common).stdout)
    assert midway["gateway_charges"] == 5
    assert midway["paid_once"] < INVOICES
    finished = worker(url, prefix, "run", "--chaos", "4", *common)
    assert finished.returncode == 0, finished.stderr
    seen = json.loads(finished.stdout)
    assert seen["mode"] == ("before" if database == "sqlite" else "inside")
    assert seen["EffectOutcomeUnknownError"] > 0  # the chaos really happened
    report = json.loads(worker(url, prefix, "report", *common).stdout)
    assert report["gateway_charges"] == INVOICES
    assert report["paid_once"] == INVOICES
    assert report["paid_twice_or_more"] == 0
    assert report["matching_receipts"] == INVOICES
    assert set(report["ledger_states"]) <= {"confirmed", "reconciled"}
    assert sum(report["ledger_states"].values()) == INVOICES
