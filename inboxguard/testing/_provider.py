"""A fake payment provider with a real idempotency contract, in memory."""

from __future__ import annotations

import datetime as dt
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from inboxguard._core.clock import Clock, checked_now, utc_now
from inboxguard._core.digest import digest_of
from inboxguard.effects.provider import MismatchBehaviour, ProviderContract, Receipt
from inboxguard.errors import ConfigurationError, ProviderRejectedError

__all__ = ["FakeProvider"]

#: What :meth:`FakeProvider.fail_next` can make the next sends do.
BEHAVIOURS = ("accept_then_timeout", "timeout", "connection_error", "reject")


@dataclass(frozen=True, slots=True)
class _Kept:
    receipt: Receipt
    digest: str
    first_at: dt.datetime


class FakeProvider:
    """An in-memory provider that behaves like an idempotent payment API.

    * It accepts by default: each new idempotency key applies one effect
      (``effects`` counts them) and returns ``Receipt("fx_<n>")``.
    * It remembers a key for ``window`` (24 hours by default) after its first
      request: a re-send with the same key and payload inside the window
      replays the first receipt without a new effect, a different payload is
      refused. After the window it forgets the key, so a late re-send applies
      the effect again: the duplicate the ledger must never cause.
    * :meth:`fail_next` queues misbehaviour for the next sends:
      ``"accept_then_timeout"`` (applies, then raises ``TimeoutError`` as if the
      answer were lost), ``"timeout"`` (raises before applying),
      ``"connection_error"``, ``"reject"`` (raises ``ProviderRejectedError``).
    * ``lookup=True`` (the default) gives it a lookup that finds an applied
      key at any age; ``lookup=False`` is a provider without one.
    * ``requests`` counts sends that reached it, ``lookups`` the lookups.

    Args:
        clock: the clock its window is measured with (share the test's).
        window: how long a key is remembered (``KEYS_KEPT_FOREVER``: forever;
            None: never, the provider has no idempotency).
        lookup: whether it offers a lookup.
        name: the contract's name (stored with each effect by the ledger).
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        window: dt.timedelta | None = dt.timedelta(hours=24),
        lookup: bool = True,
        name: str = "fake-provider",
    ) -> None:
        self.clock: Clock = clock or utc_now
        self.name = name
        self._window = window
        self._lookup = lookup
        #: Its idempotency contract, rebuilt when ``window`` or ``supports_lookup``
        #: changes (a bad window is refused here).
        self.contract = self._contract()
        self.requests = 0
        self.lookups = 0
        self.effects = 0
        self.effects_by_key: Counter[str] = Counter()
        #: Called after an effect is applied and before the answer (to stall a
        #: worker there); None: answer at once.
        self.after_apply: Callable[[str], None] | None = None
        self._script: list[str] = []
        self._kept: dict[str, _Kept] = {}
        self._applied: dict[str, Receipt] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"<FakeProvider requests={self.requests} effects={self.effects}"
            f" lookup={self.supports_lookup} window={self.window}>"
        )

    @property
    def window(self) -> dt.timedelta | None:
        """How long a key is remembered after its first request (None: forever)."""
        return self._window

    @window.setter
    def window(self, value: dt.timedelta | None) -> None:
        self._window = value
        self.contract = self._contract()

    @property
    def supports_lookup(self) -> bool:
        """Whether it offers a lookup (settable: a provider with or without one)."""
        return self._lookup

    @supports_lookup.setter
    def supports_lookup(self, value: bool) -> None:
        self._lookup = value
        self.contract = self._contract()

    def _contract(self) -> ProviderContract:
        return ProviderContract(
            idempotency_window=self._window,
            supports_lookup=self._lookup,
            on_mismatch=MismatchBehaviour.REJECT,
            name=self.name,
            notes="inboxguard.testing.FakeProvider",
        )

    def fail_next(self, behaviour: str, times: int = 1) -> None:
        """Make the next ``times`` sends misbehave (see the class doc).

        Raises:
            ConfigurationError: an unknown behaviour.
        """
        if behaviour not in BEHAVIOURS:
            msg = f"fail_next({behaviour!r}): use one of {', '.join(BEHAVIOURS)}"
            raise ConfigurationError(msg)
        with self._lock:
            self._script.extend([behaviour] * times)

    def effects_for(self, key: str) -> int:
        """Effects applied under the idempotency key ``key``."""
        return self.effects_by_key[key]

    def keys(self) -> list[str]:
        """Every idempotency key that ever applied an effect, first first."""
        return list(self.effects_by_key)

    def send(self, idempotency_key: str, payload: Any) -> Receipt:
        """Apply the effect once per key inside the window; see the class doc."""
        with self._lock:
            behaviour = self._script.pop(0) if self._script else "ok"
            if behaviour == "timeout":
                msg = f"fake provider: timed out before {idempotency_key!r} arrived"
                raise TimeoutError(msg)
            if behaviour == "connection_error":
                msg = f"fake provider: connection refused for {idempotency_key!r}"
                raise ConnectionError(msg)
            self.requests += 1
            if behaviour == "reject":
                msg = f"fake provider: card declined for {idempotency_key!r}"
                raise ProviderRejectedError(msg, reason="card_declined")
            receipt, fresh = self._apply(idempotency_key, payload)
        if fresh and self.after_apply is not None:
            self.after_apply(idempotency_key)
        if behaviour == "accept_then_timeout":
            msg = f"fake provider: {idempotency_key!r} was applied but the answer was lost"
            raise TimeoutError(msg)
        return receipt

    def lookup(self, idempotency_key: str) -> Receipt | None:
        """The receipt of the effect applied with this key, at any age, or None."""
        with self._lock:
            self.lookups += 1
            return self._applied.get(idempotency_key) if self.supports_lookup else None

    def _apply(self, key: str, payload: Any) -> tuple[Receipt, bool]:
        now = checked_now(self.clock)
        digest = digest_of(payload)
        kept = self._kept.get(key)
        if kept is not None and self.contract.remembers(kept.first_at, now):
            if kept.digest != digest:
                msg = f"fake provider: key {key!r} was used with another payload"
                raise ProviderRejectedError(msg, reason="idempotency_error")
            return kept.receipt, False
        self.effects += 1
        self.effects_by_key[key] += 1
        receipt = Receipt(f"fx_{self.effects}", {"idempotency_key": key})
        self._kept[key] = _Kept(receipt, digest, now)
        self._applied.setdefault(key, receipt)
        return receipt, True
