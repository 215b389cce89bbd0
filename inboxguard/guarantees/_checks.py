"""Contradictions: a table that promises something its configuration breaks.

Each one names the handler, the table field and the setting to change.
"""

from __future__ import annotations

from dataclasses import dataclass

from inboxguard._core.handlers import HandlerFacts
from inboxguard._core.retention import format_duration
from inboxguard.effects.provider import KEYS_KEPT_FOREVER
from inboxguard.guarantees._derive import duration, effect_of

__all__ = ["Contradiction", "contradictions"]


@dataclass(frozen=True, slots=True)
class Contradiction:
    """One problem with a handler's guarantee table: ``setting`` is what to
    change (``visibility_timeout``, ``acks_late``, ``idempotency_window``...),
    ``field`` the table field it breaks; ``str()`` is one line naming both."""

    handler: str
    field: str
    setting: str
    message: str

    def __str__(self) -> str:
        return f"{self.handler}: {self.field}: {self.message}"

    def to_json(self) -> dict[str, str]:
        """``handler``, ``field``, ``setting`` and ``message``."""
        return {
            "handler": self.handler,
            "field": self.field,
            "setting": self.setting,
            "message": self.message,
        }


def contradictions(facts: HandlerFacts) -> list[Contradiction]:
    """Every contradiction of one handler's configuration with its table."""
    found = _windows(facts)
    found += _provider_window(facts)
    found += [
        Contradiction(facts.handler, "delivery_mode", setting, why)
        for setting, why in facts.early_acks
    ]
    if facts.module_path_consumer is not None:
        setting = facts.module_path_consumer
        found.append(
            Contradiction(
                facts.handler,
                "identity",
                setting,
                f"consumer {facts.consumer!r} is derived from the module path: moving or"
                " renaming the module files new evidence under another name, so commands"
                f" already processed run again; set {setting} to a stable business name",
            )
        )
    effect = effect_of(facts.declared)
    if effect.contract is not None and effect.ledger is None:
        found.append(
            Contradiction(
                facts.handler,
                "reconciliation",
                "ledger",
                f"the handler declares provider {effect.name!r} but its effect goes through no"
                " effect ledger: a timeout leaves no record and a redelivery calls the provider"
                " again; call it through EffectLedger.execute and declare"
                " Guarantee(ledger=...)",
            )
        )
    return found


def _windows(facts: HandlerFacts) -> list[Contradiction]:
    horizon = facts.inbox.retention.horizon
    return [
        Contradiction(
            facts.handler,
            "dedup_window",
            window.name,
            f"the dedup window ({format_duration(horizon)}) is shorter than the replay"
            f" window {window.name} ({duration(window.length)}, {window.source}): a copy"
            " replayed after the evidence expired runs again; add it to the RetentionPolicy"
            f" or shorten {window.name}",
        )
        for window in facts.windows
        if window.length is None or window.length > horizon
    ]


def _provider_window(facts: HandlerFacts) -> list[Contradiction]:
    effect = effect_of(facts.declared)
    contract = effect.contract
    retry = facts.retry_horizon
    if contract is None or contract.supports_lookup:
        return []
    window = contract.idempotency_window
    if window == KEYS_KEPT_FOREVER or retry is None:
        return []
    if window is not None and retry.length is not None and retry.length <= window:
        return []
    return [
        Contradiction(
            facts.handler,
            "provider_behaviour",
            "idempotency_window",
            f"{effect.name} forgets an idempotency key after {effect.window}"
            f" (idempotency_window) but {retry.name} keeps retrying for"
            f" {duration(retry.length)} ({retry.source}) and the provider has no lookup: a"
            " retry after the window can apply the effect again (or, through the ledger,"
            f" leave it unknown); shorten {retry.name} or use a provider with a lookup",
        )
    ]
