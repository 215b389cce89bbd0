"""The two endings of a lost answer: settled on the next attempt, or left to an operator."""

import sys
import tempfile
from datetime import timedelta
from pathlib import Path

from sqlalchemy import create_engine

sys.path.insert(0, str(Path(__file__).parent))  # the stand-in gateway next to this file
from effects_gateway import Gateway

import inboxguard
from inboxguard import EffectOutcomeUnknownError, Receipt, ReconciliationRequiredError

engine = create_engine(f"sqlite:///{Path(tempfile.mkdtemp()) / 'app.db'}")
gateway = Gateway(script=["accept_then_timeout"])
ledger = inboxguard.EffectLedger(engine, clock=lambda: gateway.now)
ledger.create_schema()

# --8<-- [start:settled]
try:
    ledger.execute("invoice-7/charge", gateway, {"amount": 1500})  # charged, answer lost
except EffectOutcomeUnknownError:
    pass  # retryable: roll back, let the broker deliver again
assert ledger.get("invoice-7/charge").state == inboxguard.EffectState.UNKNOWN

receipt = ledger.execute("invoice-7/charge", gateway, {"amount": 1500})  # the redelivery
assert receipt.reference == "ch_1"  # same key inside the window: the first charge
assert (gateway.requests, gateway.charges) == (2, 1)
# --8<-- [end:settled]
assert ledger.get("invoice-7/charge").state == inboxguard.EffectState.RECONCILED

gateway.script.append("accept_then_timeout")
try:
    ledger.execute("invoice-8/charge", gateway, {"amount": 900})
except EffectOutcomeUnknownError:
    pass
gateway.now += timedelta(days=1, hours=1)  # the replay comes after the 24-hour window

# --8<-- [start:stays-unknown]
try:
    ledger.execute("invoice-8/charge", gateway, {"amount": 900})
except ReconciliationRequiredError as exc:
    print(exc)  # the window closed and there is no lookup: nothing was sent
assert gateway.charges == 2  # invoice-7 once, invoice-8 once: no blind re-send

# An operator checks the provider's dashboard and records the verdict:
ledger.resolve("invoice-8/charge", applied=True, receipt=Receipt("ch_2"), note="found in dashboard")
assert ledger.execute("invoice-8/charge", gateway, {"amount": 900}).reference == "ch_2"
# --8<-- [end:stays-unknown]
