"""The canonical payload digest: pinned vectors, canonical form, clear errors."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import os
import subprocess
import sys
import uuid
from decimal import Decimal

import pytest

from inboxguard import PayloadEncodingError, digest_of
from inboxguard._core.digest import canonical_json

# Pinned vectors: (payload, canonical text, digest). The digests were checked
# with `printf '%s' TEXT | sha256sum`. A change to any of them would turn every
# stored command into a payload mismatch, so they never change silently.
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


@pytest.mark.parametrize(("payload", "text", "hexdigest"), VECTORS)
def test_digest_vectors_are_pinned(payload: object, text: str, hexdigest: str) -> None:
    """Known payloads have a fixed canonical text and a fixed digest."""
    assert canonical_json(payload) == text
    assert digest_of(payload) == "sha256:" + hexdigest


def test_key_order_and_whitespace_do_not_change_the_digest() -> None:
    """Equal payloads built in different orders have one digest."""
    assert digest_of({"a": 1, "b": {"c": 2, "d": 3}}) == digest_of({"b": {"d": 3, "c": 2}, "a": 1})
    assert digest_of((1, 2)) == digest_of([1, 2])
    assert digest_of({"a": 1}) != digest_of({"a": 1.0})


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
