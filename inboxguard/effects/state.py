"""The effect state machine, pure: no I/O, no clock, no database.

An effect moves along exactly these paths::

    (new) -> prepared -> confirmed  -> compensated
                      -> unknown    -> reconciled -> compensated (if applied)
                      -> rejected

``reconciled`` records whether the provider applied the effect; an applied
one is undone like a confirmed one (an effect that once timed out is still
a charge that can be refunded), and the ledger refuses to compensate one
that was not applied. Every other change of state raises
:class:`~inboxguard.errors.InvalidTransitionError`.
A lease takeover or a re-send is not a change of state: the ledger records it
in the history with the same state on both sides.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from inboxguard.errors import InvalidTransitionError

__all__ = ["TERMINAL", "TRANSITIONS", "EffectState", "check_transition"]


class EffectState(enum.StrEnum):
    """Where an external effect stands (stored lowercase in ``state``).

    ``PREPARED``: recorded and committed before dispatch; the provider may have
    been called. ``CONFIRMED``: the provider accepted it; its receipt is
    stored. ``UNKNOWN``: the call ended ambiguously. ``RECONCILED``: an unknown
    effect was settled (by lookup, a same-key re-send or an operator), with
    whether the provider applied it. ``REJECTED``: the provider definitely
    refused it. ``COMPENSATED``: a confirmed (or reconciled and applied)
    effect was undone.
    """

    PREPARED = "prepared"
    CONFIRMED = "confirmed"
    UNKNOWN = "unknown"
    RECONCILED = "reconciled"
    REJECTED = "rejected"
    COMPENSATED = "compensated"


#: Allowed successors of each state; ``None`` is "no record yet".
TRANSITIONS: Mapping[EffectState | None, frozenset[EffectState]] = {
    None: frozenset({EffectState.PREPARED}),
    EffectState.PREPARED: frozenset(
        {EffectState.CONFIRMED, EffectState.UNKNOWN, EffectState.REJECTED}
    ),
    EffectState.UNKNOWN: frozenset({EffectState.RECONCILED}),
    EffectState.CONFIRMED: frozenset({EffectState.COMPENSATED}),
    EffectState.RECONCILED: frozenset({EffectState.COMPENSATED}),
    EffectState.REJECTED: frozenset(),
    EffectState.COMPENSATED: frozenset(),
}

#: States no automatic path leaves (``confirmed`` and an applied
#: ``reconciled`` only by compensation).
TERMINAL = frozenset({EffectState.RECONCILED, EffectState.REJECTED, EffectState.COMPENSATED})


def check_transition(
    current: EffectState | None, target: EffectState, *, effect_key: str | None = None
) -> None:
    """Return if ``current -> target`` is one of the allowed paths.

    Raises:
        InvalidTransitionError: any other change of state, including staying
            in the same state.
    """
    if target in TRANSITIONS[current]:
        return
    allowed = sorted(str(state) for state in TRANSITIONS[current])
    here = "a new effect" if current is None else f"state {current}"
    who = f"effect {effect_key!r}: " if effect_key is not None else ""
    options = ", ".join(allowed) if allowed else "nothing (it is final)"
    msg = f"{who}cannot move from {here} to {target}; {here} may only move to {options}"
    raise InvalidTransitionError(
        msg,
        from_state=None if current is None else str(current),
        to_state=str(target),
        effect_key=effect_key,
    )
