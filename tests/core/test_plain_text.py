"""The shortcut for plain payloads writes exactly what the walker writes.

A stored digest or result written by the shortcut must equal, byte for byte,
what the walker writes for the same value: otherwise a redelivered command
would be a payload mismatch depending on which path ran.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inboxguard import PayloadEncodingError, digest_of
from inboxguard._core.canonical import Walker, emit, plain_text
from inboxguard._core.digest import canonical_json, digest_text
from inboxguard._core.extract import payload_of

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**19), max_value=10**19)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.sampled_from(["\ud800", "a\udfffb", "Zoë", "\u2028", 'q"\\\n'])
)


class Record(dict[str, Any]):
    """A direct dict subclass that keeps dict's items (as a bound call's payload does)."""


keys = st.text(max_size=6) | st.sampled_from(["\udc80", "é"])
trees = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(keys, inner, max_size=4)
        | st.dictionaries(keys, inner, max_size=4).map(Record)
    ),
    max_leaves=20,
)


def _walked_digest_text(value: object) -> str | None:
    """The walker's digest text, or None when the walker refuses the value."""
    try:
        return emit(Walker("payload", {}, by_value=True).run(value))
    except PayloadEncodingError:
        return None


@settings(max_examples=600)
@given(trees)
def test_the_shortcut_digest_text_is_the_walkers(value: Any) -> None:
    """Wherever the shortcut answers, it gives the walker's digest text."""
    fast = plain_text(value, by_value=True)
    walked = _walked_digest_text(value)
    if fast is not None:
        assert fast == walked
    if walked is None:
        assert fast is None  # a value the walker refuses never passes the shortcut


@settings(max_examples=600)
@given(trees)
def test_the_shortcut_stored_form_is_the_walkers(value: Any) -> None:
    """Wherever the shortcut answers, it gives the walker's stored form."""
    fast = plain_text(value, by_value=False)
    try:
        plain = Walker("payload", {}, by_value=False).run(value)
    except PayloadEncodingError:
        assert fast is None
        return
    walked = json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if fast is not None:
        assert fast == walked


@pytest.mark.parametrize(
    "value",
    [
        {"id": "cmd-1", "amount": 1250, "express": True, "note": None},
        {"lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2.5}], "name": "Zoë"},
        [1, "two", 3.25, None, False],
        {},
        payload_of(("inv-9",), {"amount": 100}, lambda invoice_id, amount: None),
    ],
)
def test_common_payloads_take_the_shortcut(value: object) -> None:
    """The payloads most consumers send are answered without the walker."""
    assert plain_text(value, by_value=True) is not None
    assert plain_text(value, by_value=False) is not None
    assert digest_text(value) == plain_text(value, by_value=True)
    assert canonical_json(value) == plain_text(value, by_value=False)


class Reordered(dict[str, Any]):
    """A dict subclass whose items() is its own."""

    def items(self) -> Any:
        return reversed(list(super().items()))


class Both(dict[str, Any], Mapping[str, Any]):
    """A dict subclass with another base besides dict."""


class Count(int):
    """An int subclass."""


class Text(str):
    """A str subclass whose __str__ hides the content."""

    def __str__(self) -> str:
        return "hidden"


@pytest.mark.parametrize(
    "value",
    [
        {"id": Text("a")},  # a subclass: the walker reads its content
        {"n": Count(7)},
        {"big": 10**18},  # beyond the shortcut's ints
        {"f": 1.0},  # a whole float is an int by value
        {"f": 1e-7},  # an exponent is written out by value
        {"f": -0.0},
        {"f": math.inf},
        {"bad": "\ud800"},
        {1: "int key"},
        {"deep": [[[[["five levels"]]]]]},
        ("a", "tuple"),
        Reordered(a=1),
        Both(a=1),
    ],
)
def test_values_outside_the_shortcut_take_the_walker(value: object) -> None:
    """Anything the walker might write differently, or refuse, goes to the walker."""
    assert plain_text(value, by_value=True) is None


def test_a_cycle_is_refused_by_the_walker_not_looped_on() -> None:
    """A payload that contains itself still gets the walker's clear error."""
    looped: dict[str, Any] = {"a": []}
    looped["a"].append(looped)
    with pytest.raises(PayloadEncodingError, match="contains itself"):
        digest_of(looped)


def test_exclusions_always_take_the_walker() -> None:
    """An excluded field is left out whatever the payload's shape."""
    assert digest_of({"id": 1, "trace": "x"}, exclude=("trace",)) == digest_of({"id": 1})
