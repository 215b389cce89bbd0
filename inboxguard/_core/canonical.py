"""What a payload value *is*: the walk from Python values to plain JSON values.

One walker serves two encodings. The stored form (``by_value=False``) keeps
numbers as given (floats as floats, ``Decimal`` as its text) because it is
what the outbox sends and what a stored result decodes to. The digest form
(``by_value=True``) turns every number into :class:`Number`, its canonical
decimal text, so that the numeric value decides (see ``canonical_number``).

Both encode the content of a value, never its presentation: a ``str``,
``int`` or ``float`` subclass, an ``Enum`` member, a ``Decimal``, ``UUID`` or
date subclass are read through the base type's own methods, so an
overridden ``__str__`` (a redacting wrapper, say) cannot hide a change.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import math
import uuid
from collections.abc import Mapping
from decimal import Decimal
from json.encoder import encode_basestring
from typing import Any, Final

from inboxguard.errors import PayloadEncodingError

__all__ = [
    "MAX_DEPTH",
    "MAX_NUMBER_DIGITS",
    "Exclusions",
    "Number",
    "Walker",
    "compact_json",
    "emit",
    "plain_text",
]

#: Deepest nesting of containers (mappings, lists, dataclasses, models) accepted.
MAX_DEPTH: Final = 100
#: Most digits a number may have (Python's default int-to-text limit).
MAX_NUMBER_DIGITS: Final = 4300
#: An int with more bits than this has more than MAX_NUMBER_DIGITS digits.
_MAX_BITS: Final = 14286
#: Every whole float up to this is written (shortest text) as its int.
_EXACT_FLOAT_INT: Final = 2**53

#: Excluded paths as a tree: a segment maps to its sub-tree, or to None when
#: the whole field is left out.
Exclusions = dict[str, "Exclusions | None"]


class Number(str):
    """A number's canonical JSON text (digest form only)."""

    __slots__ = ()


class Walker:
    """Converts one payload to plain JSON values, tracking the path for errors."""

    def __init__(self, root: str, exclusions: Exclusions, *, by_value: bool) -> None:
        self.path: list[str] = [root]
        self.exclusions = exclusions
        self.by_value = by_value
        self.open: set[int] = set()  # ids of the containers on the current path
        self.kept = 0  # leaf values kept
        self.dropped = 0  # fields left out by an exclusion

    def run(self, value: object) -> Any:
        """Walk ``value`` from the root.

        Raises:
            PayloadEncodingError: a value has no canonical form, or the
                exclusions left nothing of a payload that had values.
        """
        plain = self.walk(value, self.exclusions)
        if self.dropped and not self.kept:
            msg = (
                "exclude leaves no value of the payload: every digest would be equal and a"
                " changed payload would pass as a duplicate; exclude only volatile fields"
            )
            raise PayloadEncodingError(msg, path="exclude")
        return plain

    def fail(self, reason: str) -> PayloadEncodingError:
        """The error for the value at the current path."""
        where = "".join(self.path)
        return PayloadEncodingError(f"{where}: {reason}", path=where)

    def walk(self, value: object, excl: Exclusions) -> Any:  # noqa: PLR0911
        """One value: scalars here, containers and the rest in helpers."""
        kind = type(value)
        if kind is str:
            return self._text(value)  # type: ignore[arg-type]
        if kind is bool or value is None:
            self.kept += 1
            return value
        if kind is int:
            return self._int(value)  # type: ignore[arg-type]
        if kind is float:
            return self._float(value)  # type: ignore[arg-type]
        if isinstance(value, enum.Enum):
            return self.walk(value.value, excl)
        if isinstance(value, Mapping | list | tuple):
            return self._container(value, excl)
        if isinstance(value, str):  # subclasses: the content, not __str__
            return self._text(str.__str__(value))
        if isinstance(value, int):
            return self._int(int.__int__(value))
        if isinstance(value, float):
            return self._float(float.__float__(value))
        return self._other(value, excl)

    # -- scalars ----------------------------------------------------------------------

    def _text(self, value: str) -> str:
        self._utf8(value)
        self.kept += 1
        return value

    def _utf8(self, value: str) -> None:
        if value.isascii():
            return
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as error:
            bad = value[error.start : error.end]
            raise self.fail(
                f"text contains {bad!r} at index {error.start}, a lone surrogate with no"
                " UTF-8 form; decode the producer's bytes correctly or send them as base64"
            ) from None

    def _int(self, value: int) -> Any:
        text = None
        if value.bit_length() <= _MAX_BITS:
            try:
                text = str(value)
            except ValueError:  # the interpreter's own limit is lower
                text = None
        if text is None or len(text.lstrip("-")) > MAX_NUMBER_DIGITS:
            raise self.fail(
                f"an integer of {value.bit_length()} bits has more than {MAX_NUMBER_DIGITS}"
                " digits; send it as a string"
            )
        self.kept += 1
        return Number(text) if self.by_value else value

    def _float(self, value: float) -> Any:
        if not math.isfinite(value):
            raise self.fail(f"{value!r} has no JSON form; send it as a string or leave it out")
        self.kept += 1
        if not self.by_value:
            return value
        if value.is_integer():
            if abs(value) <= _EXACT_FLOAT_INT:
                return Number(int(value))  # its shortest text is this int
        elif "e" not in (text := repr(value)):
            return Number(text)  # shortest, plain, not whole: already canonical
        return self._number(Decimal(repr(value)))

    def _decimal(self, value: Decimal) -> Any:
        if not Decimal.is_finite(value):
            raise self.fail(f"{value!r} has no JSON form; send it as a string or leave it out")
        self.kept += 1
        return self._number(value) if self.by_value else Decimal.__str__(value)

    def _number(self, value: Decimal) -> Number:
        text = canonical_number(value)
        if text is None:
            raise self.fail(
                f"{value!r} has more than {MAX_NUMBER_DIGITS} digits written out; send it"
                " as a string"
            )
        return Number(text)

    # -- containers ---------------------------------------------------------------------

    def _container(self, value: Any, excl: Exclusions) -> Any:
        key = id(value)
        if key in self.open:
            raise self.fail("the value contains itself (a cycle); send a tree, not a graph")
        if len(self.open) >= MAX_DEPTH:
            raise self.fail(f"nested deeper than {MAX_DEPTH} levels; flatten it or exclude it")
        self.open.add(key)
        if isinstance(value, Mapping):
            plain: Any = self._mapping(value, excl)
        elif isinstance(value, list | tuple):
            plain = self._sequence(value, excl)
        elif dataclasses.is_dataclass(value):
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            plain = self._mapping(fields, excl)
        else:
            plain = self.walk(self._dump(value), excl)
        self.open.discard(key)
        return plain

    def _dump(self, value: Any) -> Any:
        try:
            return value.model_dump()
        except (RecursionError, ValueError) as error:
            raise self.fail(f"model_dump() failed ({error}); send a tree of plain values") from None

    def _mapping(self, value: Mapping[Any, Any], excl: Exclusions) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, item in value.items():
            self.path.append(f"[{key!r}]")
            if type(key) is not str:
                raise self.fail(f"key {key!r} is a {type(key).__name__}; keys must be str")
            self._utf8(key)
            sub = excl.get(key, _KEEP) if excl else _KEEP
            if sub is None:
                self.dropped += 1
            else:
                out[key] = self.walk(item, sub)
            self.path.pop()
        return out

    def _sequence(self, value: list[Any] | tuple[Any, ...], excl: Exclusions) -> list[Any]:
        out = []
        for index, item in enumerate(value):
            self.path.append(f"[{index}]")
            out.append(self.walk(item, excl))
            self.path.pop()
        return out

    def _other(self, value: object, excl: Exclusions) -> Any:
        if isinstance(value, Decimal):
            return self._decimal(value)
        if isinstance(value, uuid.UUID):
            return self._text(uuid.UUID.__str__(value))
        if isinstance(value, dt.datetime):
            if value.tzinfo is None or value.utcoffset() is None:
                raise self.fail(
                    f"{value!r} is a naive datetime; attach a timezone (e.g. tzinfo=UTC)"
                )
            return self._text(dt.datetime.isoformat(dt.datetime.astimezone(value, dt.UTC)))
        if isinstance(value, dt.date):
            return self._text(dt.date.isoformat(value))
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._container(value, excl)
        if callable(getattr(value, "model_dump", None)):
            return self._container(value, excl)
        raise self.fail(
            f"values of type {type(value).__name__} have no canonical encoding; convert it"
            " to str, int, Decimal, a dict or a list, or exclude the field"
        )


#: The exclusions below a field that has none of its own.
_KEEP: Exclusions = {}


def canonical_number(value: Decimal) -> str | None:
    """The canonical text of a finite number, or None when it is too long.

    Plain decimal notation without exponent, without trailing zeros after
    the point and without a point for whole numbers; ``-0`` is ``0``.
    """
    sign, digits, exponent = Decimal.as_tuple(value)
    assert isinstance(exponent, int)  # finite: checked by the caller
    coefficient = "".join(map(str, digits)).lstrip("0")
    if not coefficient:
        return "0"
    stripped = coefficient.rstrip("0")
    exponent += len(coefficient) - len(stripped)
    if len(stripped) + abs(exponent) > MAX_NUMBER_DIGITS:
        return None
    if exponent >= 0:
        text = stripped + "0" * exponent
    else:
        point = len(stripped) + exponent
        text = (
            f"{stripped[:point]}.{stripped[point:]}" if point > 0 else f"0.{'0' * -point}{stripped}"
        )
    return f"-{text}" if sign else text


def emit(value: Any) -> str:
    """The compact, key-sorted JSON text of a digest-form value."""
    kind = type(value)
    if kind is Number:
        return value  # type: ignore[no-any-return]
    if kind is str:
        return encode_basestring(value)
    if kind is dict:
        return (
            "{"
            + ",".join(f"{encode_basestring(key)}:{emit(value[key])}" for key in sorted(value))
            + "}"
        )
    if kind is list:
        return "[" + ",".join(map(emit, value)) + "]"
    return _LITERALS[value]


_LITERALS: Final = {None: "null", True: "true", False: "false"}


#: Compact, key-sorted JSON of a tree of plain values (no cycles: the
#: walker's output, or what :func:`plain_text` admits). It writes the stored
#: form, and for the values :func:`plain_text` admits it writes the walker's
#: digest text byte for byte.
compact_json: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False
).encode
#: Deepest nesting :func:`plain_text` checks; deeper payloads take the walker.
_PLAIN_DEPTH: Final = 4
#: Ints below this in magnitude are far inside MAX_NUMBER_DIGITS.
_PLAIN_INT: Final = 10**18


def plain_text(value: object, *, by_value: bool) -> str | None:
    """The canonical text of a tree of plain values, or None to use the walker.

    Admits dicts with ``str`` keys (dict itself or a direct subclass that
    keeps dict's ``items``, such as a bound call's payload) and lists (at most
    ``_PLAIN_DEPTH`` deep) of exact ``str``, ``bool``, ``None``, ints of at
    most 18 digits and finite floats (in the digest form, only floats whose
    shortest text already is canonical). For those values the walker adds
    nothing to what ``json`` writes, so the text is identical; anything else
    (subclasses, other types, bad text, deep or cyclic trees, exclusions)
    returns None and the walker decides, errors included.
    """
    return compact_json(value) if _plain(value, by_value, _PLAIN_DEPTH) else None


def _plain(value: object, by_value: bool, depth: int) -> bool:  # noqa: PLR0911
    kind = type(value)
    if kind is str:
        return _plain_str(value)  # type: ignore[arg-type]
    if kind is int:
        return -_PLAIN_INT < value < _PLAIN_INT  # type: ignore[operator]
    if kind is bool or value is None:
        return True
    if kind is float:
        return _plain_float(value, by_value)  # type: ignore[arg-type]
    if not depth:
        return False
    if kind is list:
        return all(_plain(item, by_value, depth - 1) for item in value)  # type: ignore[attr-defined]
    if kind is dict or _plain_dict_kind(kind):
        return all(
            type(key) is str and _plain_str(key) and _plain(item, by_value, depth - 1)
            for key, item in value.items()  # type: ignore[attr-defined]
        )
    return False


def _plain_dict_kind(kind: type) -> bool:
    """A direct subclass of dict (such as a bound call's payload) that reads
    its items as dict does: the walker and ``json`` both read ``items()``."""
    return kind.__mro__ == (kind, dict, object) and kind.items is dict.items  # type: ignore[attr-defined]


def _plain_str(value: str) -> bool:
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the walker names it
        return False
    return True


def _plain_float(value: float, by_value: bool) -> bool:
    if not math.isfinite(value):
        return False
    if not by_value:
        return True
    # The digest form writes whole floats as ints and exponents out; only a
    # shortest text with neither is already canonical.
    return not value.is_integer() and "e" not in repr(value)
