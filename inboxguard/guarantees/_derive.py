"""From an adapter's facts to a filled-in :class:`~inboxguard.Guarantee`.

Every field comes from the running configuration: the inbox's engine and
tables, its retention policy, the replay windows the adapter discovered, the
command-ID spec, the acks settings, and the provider's contract. What nobody
can see (whether the handler calls an outside system, its terminal states
beyond the library's) comes from the declaration, or stays unknown.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from inboxguard._core.guarantee import Guarantee, GuaranteeFact, Setting
from inboxguard._core.handlers import HandlerFacts
from inboxguard._core.retention import format_duration
from inboxguard.effects.provider import KEYS_KEPT_FOREVER, ProviderContract
from inboxguard.effects.state import EffectState

__all__ = ["Effect", "derive", "duration", "effect_of"]

#: Effect states a handler's effect ends in (``unknown`` until it is settled).
_SETTLED = (
    EffectState.CONFIRMED,
    EffectState.REJECTED,
    EffectState.RECONCILED,
    EffectState.COMPENSATED,
)
_UNDECLARED = (
    "not declared: pass guarantee=Guarantee(provider=..., ledger=...) or"
    " Guarantee(no_external_effect=True)"
)


def duration(length: dt.timedelta | None) -> str:
    """A window's length as shown in tables (None: unbounded)."""
    return "unbounded" if length is None else format_duration(length)


@dataclass(frozen=True, slots=True)
class Effect:
    """What a declaration says about the handler's external effect."""

    contract: ProviderContract | None
    name: str | None
    ledger: Any
    declared_none: bool

    @property
    def window(self) -> str:
        """The provider's idempotency window, as shown."""
        if self.contract is None:
            return "unknown"
        window = self.contract.idempotency_window
        if window is None:
            return "none (no idempotency)"
        return "forever" if window == KEYS_KEPT_FOREVER else format_duration(window)


def effect_of(declared: Guarantee | None) -> Effect:
    """The external effect a declaration describes."""
    if declared is None:
        return Effect(None, None, None, declared_none=False)
    provider = declared.provider
    contract = None
    name = None
    if provider is not None:
        contract = provider if isinstance(provider, ProviderContract) else provider.contract
        name = contract.name or (
            type(provider).__name__ if not isinstance(provider, ProviderContract) else "provider"
        )
    return Effect(contract, name, declared.ledger, declared.no_external_effect)


def derive(facts: HandlerFacts) -> Guarantee:
    """The handler's whole table."""
    declared = facts.declared
    effect = effect_of(declared)
    horizon = facts.inbox.retention.horizon
    return Guarantee(
        handler=facts.handler,
        consumer=facts.consumer,
        layer=_layer(facts, effect),
        transaction_boundary=_boundary(facts, effect),
        delivery_mode=_delivery(facts),
        identity=_identity(facts),
        provider_behaviour=_provider(declared, effect),
        dedup_window=_dedup(facts),
        reconciliation=_reconciliation(declared, effect),
        terminal_states=_terminal(declared, effect),
        provider=declared.provider if declared else None,
        ledger=effect.ledger,
        compensation=declared.compensation if declared else None,
        no_external_effect=effect.declared_none,
        lost_ack_example=(declared and declared.lost_ack_example) or _lost_ack(facts, effect),
        unknown_case=(declared and declared.unknown_case) or _unknown(effect, horizon),
    )


#: The local layer of each kind of inbox: its name in the settings, its text.
_LOCAL = {
    "db": "one database transaction: the inbox's evidence and the handler's writes",
    "redis": (
        "one Redis MULTI/EXEC (WATCH + lease): the inbox's evidence key and the"
        " handler's queued writes"
    ),
}


def _layer(facts: HandlerFacts, effect: Effect) -> GuaranteeFact:
    store = facts.inbox.capabilities.local
    local = _LOCAL[store]
    if effect.declared_none:
        return GuaranteeFact(f"local only: {local}", settings={"external": "none", "local": store})
    if effect.contract is None:
        return GuaranteeFact(
            f"local: {local}; external effects: unknown (not declared)",
            settings={"external": None, "local": store},
        )
    if effect.ledger is None:
        return GuaranteeFact(
            f"local: {local}; external ({effect.name}): unguarded, no effect ledger",
            settings={"external": "unguarded", "local": store},
        )
    return GuaranteeFact(
        f"local: {local}; external ({effect.name}): the effect ledger and the provider's"
        f" idempotency key, while the provider remembers it ({effect.window})",
        settings={"external": "ledger+idempotency key", "local": store},
    )


def _boundary(facts: HandlerFacts, effect: Effect) -> GuaranteeFact:
    text, settings = facts.inbox.transaction_boundary()
    if effect.ledger is not None:
        ledger_table = effect.ledger.tables.effects.name
        settings["ledger_table"] = ledger_table
        text += f"; the effect ledger ({ledger_table}) commits each step on its own"
    return GuaranteeFact(text, settings=settings)


def _delivery(facts: HandlerFacts) -> GuaranteeFact:
    declared = facts.declared.fact("delivery_mode") if facts.declared else None
    return declared or facts.delivery


def _identity(facts: HandlerFacts) -> GuaranteeFact:
    source = ", ".join(f"{k}: {v}" for k, v in facts.identity.items())
    return GuaranteeFact(
        f"business command ID ({source}), evidence filed under consumer {facts.consumer!r}",
        settings={**facts.identity, "consumer": facts.consumer},
    )


def _dedup(facts: HandlerFacts) -> GuaranteeFact:
    policy = facts.inbox.retention
    settings: dict[str, Setting] = {
        "horizon": format_duration(policy.horizon),
        "margin": format_duration(policy.margin),
    }
    for name, length in policy.windows.items():
        settings[f"retention.{name}"] = format_duration(length)
    if policy.result_ttl is not None:
        settings["result_ttl"] = format_duration(policy.result_ttl)
    seen = []
    for window in facts.windows:
        settings[window.name] = duration(window.length)
        seen.append(f"{window.name} {duration(window.length)}")
    found = "; replay windows found: " + ", ".join(seen) if seen else "; no replay window found"
    return GuaranteeFact(
        f"{format_duration(policy.horizon)}: evidence is kept for the longest retention"
        f" window plus the margin{found}",
        settings=settings,
    )


def _contract_settings(effect: Effect) -> dict[str, Setting]:
    contract = effect.contract
    if contract is None:
        return {}
    return {
        "provider": effect.name,
        "idempotency_window": effect.window,
        "supports_lookup": contract.supports_lookup,
        "on_mismatch": str(contract.on_mismatch),
        "contract_source": contract.source,
    }


def _provider(declared: Guarantee | None, effect: Effect) -> GuaranteeFact:
    text = declared.fact("provider_behaviour") if declared else None
    settings = _contract_settings(effect)
    if text is not None:
        return GuaranteeFact(text.value, "declared", settings)
    if effect.declared_none:
        return GuaranteeFact("none: the handler calls no outside system", "declared")
    contract = effect.contract
    if contract is None:
        return GuaranteeFact.unknown(_UNDECLARED)
    lookup = "a lookup by key" if contract.supports_lookup else "no lookup by key"
    return GuaranteeFact(
        f"{effect.name} remembers an idempotency key for {effect.window}; a reused key with"
        f" another payload: {contract.on_mismatch}; {lookup}",
        settings=settings,
    )


def _reconciliation(declared: Guarantee | None, effect: Effect) -> GuaranteeFact:
    settings: dict[str, Setting] = {}
    if effect.contract is not None:
        settings["supports_lookup"] = effect.contract.supports_lookup
        settings["idempotency_window"] = effect.window
        settings["ledger"] = effect.ledger.tables.effects.name if effect.ledger else "none"
    if effect.contract is not None or (declared and declared.compensation):
        compensation = declared.compensation if declared else None
        settings["compensation"] = compensation or "none declared"
    text = declared.fact("reconciliation") if declared else None
    if text is not None:
        return GuaranteeFact(text.value, "declared", settings)
    if effect.declared_none:
        return GuaranteeFact(
            "not needed: no external effect; a redelivery is settled by the inbox's evidence",
            "declared",
            settings,
        )
    contract = effect.contract
    if contract is None:
        return GuaranteeFact.unknown(_UNDECLARED)
    if effect.ledger is None:
        return GuaranteeFact(
            "none: the effect goes through no effect ledger, so an ambiguous outcome is not"
            " recorded and cannot be settled",
            settings=settings,
        )
    if contract.supports_lookup:
        how = "an ambiguous outcome is settled by the provider's lookup (EffectLedger.reconcile)"
    else:
        how = (
            f"an ambiguous outcome is re-sent with the same key while the {effect.window}"
            " window is open; after it an operator settles it (EffectLedger.resolve)"
        )
    undo = f"; compensation: {declared.compensation}" if declared and declared.compensation else ""
    return GuaranteeFact(how + undo, settings=settings)


def _terminal(declared: Guarantee | None, effect: Effect) -> GuaranteeFact:
    own = declared.fact("terminal_states") if declared else None
    if own is not None:
        return own
    inbox = "processed (evidence committed), quarantined (refused or out of retries)"
    settings: dict[str, Setting] = {"inbox": "processed, quarantined"}
    if effect.ledger is not None:
        states = ", ".join(str(state) for state in _SETTLED)
        settings["effect"] = states
        return GuaranteeFact(f"{inbox}; effect: {states}", settings=settings)
    return GuaranteeFact(inbox, settings=settings)


def _lost_ack(facts: HandlerFacts, effect: Effect) -> str:
    horizon = format_duration(facts.inbox.retention.horizon)
    again = facts.redelivered or next(
        (f"after {w.name} ({duration(w.length)})" for w in facts.windows if "visib" in w.name),
        "once the broker sees the worker's connection close",
    )
    if not facts.delivery.known:
        again = "by whatever calls the handler"
    tail = "; the provider is not called again" if effect.ledger is not None else ""
    return (
        f"command C commits and the worker dies before {facts.settled_by}; C is delivered"
        f" again {again};"
        f" the inbox finds C's evidence (kept {horizon}) and returns the stored result without"
        f" running the handler{tail}"
    )


def _unknown(effect: Effect, horizon: dt.timedelta) -> str:
    if effect.declared_none:
        return (
            f"a copy delivered after the evidence horizon ({format_duration(horizon)}) without"
            " a sent time: its evidence may be purged, so nothing tells whether it ran; it runs"
            " again"
        )
    if effect.contract is None:
        return (
            "whether the handler calls an outside system is not declared: such a call is"
            " outside the transaction and can repeat when a delivery is retried"
        )
    if effect.ledger is None:
        return (
            f"the call to {effect.name} times out: nothing records whether it was applied,"
            " and a redelivery calls it again"
        )
    if effect.contract.supports_lookup:
        return (
            f"the call to {effect.name} times out and its lookup cannot answer: the effect"
            " stays unknown until EffectLedger.reconcile finds it"
        )
    return (
        f"the call to {effect.name} times out after the provider applied it: the effect is"
        f" recorded unknown; a retry re-sends with the same key only inside the"
        f" {effect.window} window; after it, it stays unknown until an operator checks the"
        " provider (EffectLedger.resolve)"
    )
