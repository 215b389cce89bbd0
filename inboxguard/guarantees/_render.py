"""Guarantee tables as Markdown, one table per handler."""

from __future__ import annotations

from collections.abc import Sequence

from inboxguard._core.guarantee import FIELDS, Guarantee, GuaranteeFact

__all__ = ["markdown"]

_TITLES = {
    "layer": "layer",
    "transaction_boundary": "transaction boundary",
    "delivery_mode": "delivery mode",
    "identity": "business identity",
    "provider_behaviour": "provider behaviour",
    "dedup_window": "deduplication window",
    "reconciliation": "reconciliation",
    "terminal_states": "terminal states",
}


def markdown(guarantees: Sequence[Guarantee]) -> str:
    """Every table, each under a heading naming its consumer and handler."""
    return "\n".join(_table(g) for g in guarantees)


def _table(guarantee: Guarantee) -> str:
    lines = [
        f"## `{guarantee.consumer}` ({guarantee.handler})",
        "",
        "| field | what holds | read from |",
        "|---|---|---|",
    ]
    for name in FIELDS:
        fact = guarantee.fact(name) or GuaranteeFact.unknown("not derived")
        lines.append(f"| {_TITLES[name]} | {_cell(_value(fact))} | {_cell(_settings(fact))} |")
    lines.append(f"| after a lost ack | {_cell(guarantee.lost_ack_example or '')} | example |")
    lines.append(f"| remains unknown | {_cell(guarantee.unknown_case or '')} | example |")
    return "\n".join(lines) + "\n"


def _value(fact: GuaranteeFact) -> str:
    if fact.value is None:
        return f"**unknown**: {fact.settings.get('why', '')}"
    return fact.value if fact.source == "derived" else f"{fact.value} (declared)"


def _settings(fact: GuaranteeFact) -> str:
    shown = [
        f"`{name}={'unknown' if value is None else value}`"
        for name, value in fact.settings.items()
        if name != "why"
    ]
    return ", ".join(shown)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
