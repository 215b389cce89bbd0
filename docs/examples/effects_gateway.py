"""A stand-in payment provider for the effect ledger's samples (not a sample itself).

It remembers each idempotency key for 24 hours like Stripe does, can lose the
answer to a request it applied, and counts requests and charges, so a sample
can assert that nothing was charged twice. Samples import it; run alone, it
checks its own replay behaviour.
"""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import inboxguard


@dataclass
class Gateway:
    """An idempotent provider: same key inside the window, same charge."""

    contract: inboxguard.ProviderContract = field(
        default_factory=lambda: inboxguard.known_contract("stripe")  # 24 h, no lookup
    )
    now: datetime = field(default_factory=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    script: list[str] = field(default_factory=list)  # "ok" or "accept_then_timeout"
    keys: dict[str, tuple[datetime, str]] = field(default_factory=dict)
    requests: int = 0
    charges: int = 0

    def send(self, idempotency_key: str, payload: dict) -> inboxguard.Receipt:
        self.requests += 1
        seen = self.keys.get(idempotency_key)
        if seen and self.now - seen[0] < self.contract.idempotency_window:
            return inboxguard.Receipt(seen[1], {"replayed": True})  # the first answer again
        self.charges += 1
        charge_id = f"ch_{self.charges}"
        self.keys[idempotency_key] = (self.now, charge_id)
        if self.script and self.script.pop(0) == "accept_then_timeout":
            raise TimeoutError("the response was lost")  # applied, but nobody knows
        return inboxguard.Receipt(charge_id, {"status": "succeeded"})

    def lookup(self, idempotency_key: str) -> inboxguard.Receipt | None:
        raise NotImplementedError  # contract.supports_lookup is False


if __name__ == "__main__":
    gateway = Gateway()
    first = gateway.send("k", {"amount": 1})
    assert gateway.send("k", {"amount": 1}).reference == first.reference
    gateway.now += timedelta(days=2)
    assert gateway.send("k", {"amount": 1}).reference != first.reference  # forgotten
