"""L1: the state machine allows exactly the documented paths (pure, no database)."""

from __future__ import annotations

import itertools

import pytest

from inboxguard import EffectState, InvalidTransitionError
from inboxguard.effects.state import TRANSITIONS, check_transition

S = EffectState
ALLOWED = {
    (None, S.PREPARED),
    (S.PREPARED, S.CONFIRMED),
    (S.PREPARED, S.UNKNOWN),
    (S.UNKNOWN, S.RECONCILED),
    (S.PREPARED, S.REJECTED),
    (S.CONFIRMED, S.COMPENSATED),
    (S.RECONCILED, S.COMPENSATED),  # L17: an applied reconciled effect is compensable
}
PAIRS = list(itertools.product([None, *S], list(S)))


def test_l01_members_are_the_seed_states() -> None:
    assert [s.name for s in S] == [
        "PREPARED",
        "CONFIRMED",
        "UNKNOWN",
        "RECONCILED",
        "REJECTED",
        "COMPENSATED",
    ]
    assert {(a, b) for a, targets in TRANSITIONS.items() for b in targets} == ALLOWED


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=str)
def test_l01_every_pair_is_allowed_or_raises(source: S | None, target: S) -> None:
    """All 42 pairs: the seven paths pass, every other one (self-loops
    included) raises InvalidTransitionError naming both states."""
    if (source, target) in ALLOWED:
        check_transition(source, target, effect_key="k")
        return
    with pytest.raises(InvalidTransitionError) as info:
        check_transition(source, target, effect_key="k")
    assert info.value.from_state == (None if source is None else str(source))
    assert info.value.to_state == str(target)
    assert info.value.effect_key == "k"
    assert str(target) in str(info.value)
