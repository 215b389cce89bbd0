"""The canonical payload digest: pinned vectors, canonical form, clear errors."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import hashlib
import json
import os
import subprocess
import sys
import uuid
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inboxguard import PayloadEncodingError, digest_of
from inboxguard._core.details import encode_details
from inboxguard._core.digest import MAX_DEPTH, canonical_json, digest_text

# Pinned vectors of the stored form (payload, canonical text, the SHA-256 of
# that text). The hashes were checked with `printf '%s' TEXT | sha256sum`.
VECTORS = [
    ({}, "{}", "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"),
    (
        {"b": 1, "a": [1, 2.5, None, True]},
        '{"a":[1,2.5,null,true],"b":1}',
        "d749551af46b4a5d105963e6fa3c8e0b889d422ca25c1c01ebbd97851eaf3280",
    ),
    (("x", 1), '["x",1]', "59402b0471b497c05ad760c869c511f92a9fbdc78b7f4c51703964d9321bc031"),
    (
        {"name": "Zoë", "amount": Decimal("10.50"), "id": uuid.UUID(int=42)},
        '{"amount":"10.50","id":"00000000-0000-0000-0000-00000000002a","name":"Zoë"}',
        "3d24e8c4cd82dec0309d23659ea350f8ff3a63c93dc829f04dfb1f60a134dd5c",
    ),
    (
        {"at": dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))},
        '{"at":"2026-11-30T11:00:00+00:00"}',
        "893d111268290ae384f6a251e996b40ae74da596091f6bac3991f26cc73c1765",
    ),
]


# Pinned vectors of the digest (payload, digest text, digest): numbers by value.
# For payloads without a Decimal or a non-shortest float the digest text is the stored form.
DIGEST_VECTORS = [
    *[vector for vector in VECTORS if "amount" not in vector[1]],
    (
        {"name": "Zoë", "amount": Decimal("10.50"), "id": uuid.UUID(int=42)},
        '{"amount":10.5,"id":"00000000-0000-0000-0000-00000000002a","name":"Zoë"}',
        "a9936aa308987f1540fdbd83e1473d69a13cd0d038072dfa4e9ff6f0d616fd35",
    ),
    (
        {"one": 1.0, "big": 1e16, "neg": -0.0, "small": 1e-05, "tenth": Decimal("0.10")},
        '{"big":10000000000000000,"neg":0,"one":1,"small":0.00001,"tenth":0.1}',
        "25373e17160a2d01624b64bd8753ba7909d550116e58d06fcbc1666b60cc1212",
    ),
]


@pytest.mark.parametrize(("payload", "text", "hexdigest"), VECTORS)
def test_stored_form_is_pinned(payload: object, text: str, hexdigest: str) -> None:
    """Known payloads have a fixed stored text (the vectors' hashes are those of
    the texts, reused by the digest vectors below)."""
    assert canonical_json(payload) == text
    assert hashlib.sha256(text.encode()).hexdigest() == hexdigest


@pytest.mark.parametrize(("payload", "text", "hexdigest"), DIGEST_VECTORS)
def test_digest_vectors_are_pinned(payload: object, text: str, hexdigest: str) -> None:
    """Known payloads have a fixed digest text and a fixed digest."""
    assert digest_text(payload) == text
    assert digest_of(payload) == "sha256:" + hexdigest


def test_key_order_and_whitespace_do_not_change_the_digest() -> None:
    """Equal payloads built in different orders have one digest."""
    assert digest_of({"a": 1, "b": {"c": 2, "d": 3}}) == digest_of({"b": {"d": 3, "c": 2}, "a": 1})
    assert digest_of((1, 2)) == digest_of([1, 2])


def test_digest_is_the_same_in_another_process() -> None:
    """A fresh interpreter with another hash seed computes the same digest."""
    code = "import inboxguard; print(inboxguard.digest_of({'k': [1, 'z', {'y': None}], 'a': 'é'}))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345", "PYTHONUTF8": "1"},
    ).stdout.strip()
    assert out == digest_of({"k": [1, "z", {"y": None}], "a": "é"})


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Line:
    sku: str
    qty: int


class Model:
    def model_dump(self) -> dict[str, object]:
        return {"x": 1}


def test_supported_types_encode() -> None:
    """Enums, dataclasses, dates and model_dump() objects have canonical forms."""
    text = canonical_json(
        {"c": Colour.RED, "l": Line("a", 2), "d": dt.date(2026, 1, 2), "m": Model()}
    )
    assert text == '{"c":"red","d":"2026-01-02","l":{"qty":2,"sku":"a"},"m":{"x":1}}'


@pytest.mark.parametrize(
    ("payload", "path", "words"),
    [
        ({"items": [{}, {}, {}, {"price": object()}]}, "payload['items'][3]['price']", "object"),
        ({"at": dt.datetime(2026, 1, 1)}, "payload['at']", "naive"),
        ({1: "x"}, "payload[1]", "keys must be str"),
        ({"f": float("nan")}, "payload['f']", "nan"),
        ({"f": [float("inf")]}, "payload['f'][0]", "inf"),
        ({"s": {1, 2}}, "payload['s']", "set"),
        ({"b": b"x"}, "payload['b']", "bytes"),
    ],
)
def test_unencodable_values_name_their_path(payload: object, path: str, words: str) -> None:
    """The error names the offending value's path and what to do."""
    with pytest.raises(PayloadEncodingError) as caught:
        digest_of(payload)
    assert caught.value.path == path
    assert words in str(caught.value)
    assert isinstance(caught.value, TypeError)


def test_exclude_leaves_volatile_fields_out() -> None:
    """Excluded dotted paths do not change the digest; others still do."""
    a = {"trace_id": "1", "meta": {"sent_at": "x", "v": 1}, "items": [{"t": 1, "k": 2}]}
    b = {"trace_id": "2", "meta": {"sent_at": "y", "v": 1}, "items": [{"t": 9, "k": 2}]}
    excl = ("trace_id", "meta.sent_at", "items.t")
    assert digest_of(a, exclude=excl) == digest_of(b, exclude=excl)
    assert digest_of(a, exclude=excl) != digest_of({**b, "meta": {"v": 2}}, exclude=excl)


def test_bad_exclude_path_is_refused() -> None:
    """An empty or malformed exclude path is a clear error."""
    with pytest.raises(PayloadEncodingError, match="dotted field path"):
        digest_of({}, exclude=("a..b",))


# -- the value, never its presentation -----------------------------------------------


class Masked(str):
    __slots__ = ()

    def __str__(self) -> str:
        return "****"


class Rounded(int):
    def __str__(self) -> str:
        return "about 10"

    def __int__(self) -> int:
        return 10


class Approx(float):
    def __float__(self) -> float:
        return 1.0

    def __repr__(self) -> str:
        return "1.0"


class Shown(enum.StrEnum):
    A = "a-value"

    def __str__(self) -> str:
        return "shown"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class MaskedDecimal(Decimal):
    def __str__(self) -> str:
        return "0"


@pytest.mark.parametrize(
    ("value", "same_as"),
    [
        (Masked("4111"), "4111"),
        (Rounded(7), 7),
        (Approx(2.5), 2.5),
        (Shown.A, "a-value"),
        (Level.HIGH, 2),
        (MaskedDecimal("3.25"), Decimal("3.25")),
    ],
    ids=["str", "int", "float", "StrEnum", "IntEnum", "Decimal"],
)
def test_subclasses_and_enums_encode_their_content(value: object, same_as: object) -> None:
    """A subclass or enum member digests as its value, whatever it prints."""
    assert digest_of({"v": value}) == digest_of({"v": same_as})
    assert canonical_json({"v": value}) == canonical_json({"v": same_as})


def test_two_values_that_print_alike_differ() -> None:
    """Masked card numbers, and two members of one enum, give two digests."""
    assert digest_of({"card": Masked("4111")}) != digest_of({"card": Masked("5500")})
    assert digest_of(Level.LOW) != digest_of(Level.HIGH)


# -- numbers ------------------------------------------------------------------------------

NUMBER_TABLE = [
    (1, 1.0, Decimal("1"), Decimal("1.00"), Decimal("1E0")),
    (10**16, 1e16, Decimal("1E+16")),
    (0, 0.0, -0.0, Decimal("-0"), Decimal("0E-5")),
    (0.1, Decimal("0.1"), Decimal("0.10")),
    (1e23, 10**23, Decimal("1e23")),
    (-2.5, Decimal("-2.50")),
    (9007199254740994.0, 9007199254740994, Decimal("9007199254740994.000")),
    (1e-7, Decimal("0.0000001")),
]


@pytest.mark.parametrize("equal", NUMBER_TABLE, ids=lambda row: str(row[0]))
def test_numbers_with_one_value_have_one_digest(equal: tuple[object, ...]) -> None:
    """The numeric value decides, whatever the type or notation (see the
    number rules in docs/inbox.md)."""
    assert len({digest_of({"n": n}) for n in equal}) == 1


def test_different_numbers_and_bools_differ() -> None:
    """Close numbers, a float's rounding and bools stay apart."""
    distinct = [1, 2, 0.1, 0.30000000000000004, 10**16 + 1, True, False, "1", None]
    assert len({digest_of(n) for n in distinct}) == len(distinct)
    assert digest_of(0.1 + 0.2) != digest_of(Decimal("0.3"))


@pytest.mark.parametrize("bad", [float("nan"), float("-inf"), Decimal("NaN"), Decimal("Infinity")])
def test_nan_and_infinity_are_refused(bad: object) -> None:
    """No JSON form: refused with the path."""
    with pytest.raises(PayloadEncodingError) as caught:
        digest_of({"x": bad})
    assert caught.value.path == "payload['x']"


def test_a_number_too_long_to_write_out_is_refused() -> None:
    """More than 4300 digits, as int or Decimal, is refused, not truncated."""
    for bad in (10**4300, Decimal("1E+5000"), Decimal("1E-5000")):
        with pytest.raises(PayloadEncodingError, match="4300"):
            digest_of([bad])
    assert digest_of(10**4299) == digest_of(Decimal(10**4299))


@given(st.integers(min_value=-(2**53), max_value=2**53))
def test_property_an_int_and_its_float_and_decimal_agree(n: int) -> None:
    """Up to 2**53 every int digests like its float and its Decimal."""
    assert digest_of(n) == digest_of(Decimal(n)) == digest_of(float(n))


@given(st.integers(min_value=2**53, max_value=10**30))
def test_property_a_big_float_stands_for_its_shortest_text(n: int) -> None:
    """Beyond 2**53 a float is the number its shortest text names (how JSON
    serialisers, JavaScript's included, write it), not its binary expansion."""
    x = float(n)
    assert digest_of(x) == digest_of(Decimal(repr(x)))
    assert digest_of(x) == digest_of(int(Decimal(repr(x))))


def test_a_javascript_rewrite_of_a_big_float_is_a_duplicate() -> None:
    """JavaScript writes 6.525119979391541e16 as 65251199793915410."""
    assert digest_of(6.525119979391541e16) == digest_of(json.loads("65251199793915410"))


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_property_a_float_survives_json_reserialisation(x: float) -> None:
    """A float and what a JSON reader makes of its text (float or Decimal) agree."""
    text = json.dumps(x)
    assert digest_of(x) == digest_of(json.loads(text))
    assert digest_of(x) == digest_of(Decimal(repr(x)))
    assert digest_of(x) == digest_of(json.loads(text, parse_float=Decimal))


@given(st.decimals(allow_nan=False, allow_infinity=False, places=None))
def test_property_trailing_zeros_never_matter(d: Decimal) -> None:
    """A Decimal digests like its value with more trailing zeros."""
    sign, digits, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    padded = Decimal((sign, (*digits, 0, 0), exponent - 2))
    assert padded == d
    assert digest_of(d) == digest_of(padded)


# -- bad payloads -------------------------------------------------------------------------


def test_cycles_depth_surrogates_and_huge_ints_name_their_path() -> None:
    """What used to escape as ValueError, UnicodeEncodeError or RecursionError
    is a PayloadEncodingError with a path."""
    loop: dict[str, Any] = {}
    loop["me"] = loop
    deep: list[Any] = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    cases = {
        "payload['me']": loop,
        f"payload{'[0]' * MAX_DEPTH}": deep,
        "payload['s']": {"s": "\ud83d"},
        "payload['k\\ud83d']": {"k\ud83d": 1},
        "payload[0]": [10**5000],
    }
    for path, payload in cases.items():
        for encode in (digest_of, canonical_json):
            with pytest.raises(PayloadEncodingError) as caught:
                encode(payload)
            assert caught.value.path == path
    ok: list[Any] = []
    for _ in range(MAX_DEPTH - 1):
        ok = [ok]
    digest_of(ok)  # the bound itself is accepted
    shared = [1]
    digest_of({"a": shared, "b": shared})  # a value used twice is no cycle


# -- exclusions -----------------------------------------------------------------------------


def test_an_exclude_that_leaves_nothing_is_refused() -> None:
    """Excluding every field would make every payload a duplicate."""
    with pytest.raises(PayloadEncodingError, match="leaves no value") as caught:
        digest_of({"trace_id": "1", "meta": {"at": 2}}, exclude=("trace_id", "meta"))
    assert caught.value.path == "exclude"
    with pytest.raises(PayloadEncodingError, match="leaves no value"):
        digest_of({"args": [], "kwargs": {"trace": "x"}}, exclude=("kwargs.trace",))
    assert digest_of({}, exclude=("trace_id",)) == digest_of({})  # nothing excluded


def test_a_key_with_a_dot_is_excluded_by_a_tuple_path() -> None:
    """("meta", "sent.at") names the key 'sent.at' inside 'meta'."""
    a = {"meta": {"sent.at": "x", "v": 1}, "k": 1}
    b = {"meta": {"sent.at": "y", "v": 1}, "k": 1}
    assert digest_of(a, exclude=[("meta", "sent.at")]) == digest_of(
        b, exclude=[("meta", "sent.at")]
    )
    assert digest_of(a, exclude=["meta.sent.at"]) != digest_of(b, exclude=["meta.sent.at"])
    for bad in [(), ("a", ""), ("a", 1), ["a"]]:
        with pytest.raises(PayloadEncodingError, match="tuple of keys"):
            digest_of({}, exclude=[bad])  # type: ignore[list-item]


# -- details ----------------------------------------------------------------------------------


def test_details_never_fail_to_encode() -> None:
    """Details that json cannot take are kept as text, never raised."""

    class NoRepr:
        def __repr__(self) -> str:
            raise RuntimeError

    loop: list[Any] = []
    loop.append(loop)
    cases: list[dict[Any, Any]] = [
        {"c": loop},
        {(1,): "k"},
        {"big": 10**5000},
        {"o": NoRepr()},
        {"s": "\ud800"},
    ]
    for details in cases:
        text = encode_details(details)
        assert text is not None
        text.encode("utf-8")
        json.loads(text)


def test_command_ids_read_subclasses_by_value() -> None:
    """An int or str subclass used for a command ID gives its value, not its print."""
    from inboxguard import command_id_for
    from inboxguard._core.identity import as_id

    assert as_id(Rounded(7)) == "7"
    assert command_id_for("card.charge", card=Masked("4111"), n=Rounded(7)) == (
        "card.charge:card=4111,n=7"
    )
