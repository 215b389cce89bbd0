"""A provider adapter translates an SDK's errors into the ledger's vocabulary.

The SDK here is a stand-in with the shape of Stripe's Python library, so the
sample runs offline; with the real one, `import stripe` replaces the class.
"""

import tempfile
from pathlib import Path
from types import SimpleNamespace

from sqlalchemy import create_engine


class _CardError(Exception):
    code = "card_declined"


class _APIConnectionError(Exception):
    pass


class _PaymentIntent:
    @staticmethod
    def create(*, amount: int, currency: str, idempotency_key: str) -> SimpleNamespace:
        if amount > 100_000:
            raise _CardError("Your card was declined.")
        return SimpleNamespace(id=f"pi_{idempotency_key}", status="succeeded")


stripe = SimpleNamespace(
    PaymentIntent=_PaymentIntent,
    error=SimpleNamespace(CardError=_CardError, APIConnectionError=_APIConnectionError),
)
engine = create_engine(f"sqlite:///{Path(tempfile.mkdtemp()) / 'app.db'}")

# --8<-- [start:usage]
import datetime as dt

import inboxguard

ledger = inboxguard.EffectLedger(engine, table_prefix="inboxguard_")
ledger.create_schema()  # idempotent: <prefix>effects and <prefix>effect_history
# or with Alembic: alembic upgrade inboxguard_effects@head (see migrations.md)


class StripeCharges:
    """An adapter: translate the SDK's errors into the ledger's vocabulary."""

    contract = inboxguard.known_contract("stripe")  # 24 h window, mismatch rejected

    def send(self, idempotency_key: str, payload: dict) -> inboxguard.Receipt:
        try:
            charge = stripe.PaymentIntent.create(**payload, idempotency_key=idempotency_key)
        except stripe.error.CardError as e:  # a definite "no"
            raise inboxguard.ProviderRejectedError(str(e), reason=e.code) from e
        except stripe.error.APIConnectionError as e:  # maybe, maybe not
            raise ConnectionError(str(e)) from e
        return inboxguard.Receipt(charge.id, {"status": charge.status})

    def lookup(self, idempotency_key: str) -> inboxguard.Receipt | None:
        raise NotImplementedError  # contract.supports_lookup is False


receipt = ledger.execute(
    "invoice-42/charge",
    StripeCharges(),
    {"amount": 4200, "currency": "eur"},
    lease=dt.timedelta(seconds=30),
)
# --8<-- [end:usage]

assert ledger.get("invoice-42/charge").state == inboxguard.EffectState.CONFIRMED
try:
    ledger.execute("invoice-43/charge", StripeCharges(), {"amount": 500_000, "currency": "eur"})
except inboxguard.ProviderRejectedError:
    pass
assert ledger.get("invoice-43/charge").state == inboxguard.EffectState.REJECTED
