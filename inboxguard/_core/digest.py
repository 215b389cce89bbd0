"""Canonical payload encoding and its digest.

The digest is ``"sha256:" + hex(sha256(canonical JSON))``. The canonical JSON has
sorted keys, no insignificant whitespace and UTF-8 text, so key order and the
producer's formatting never change a digest. The test vectors in
``tests/core/test_digest.py`` pin the encoding: a change that breaks them would
turn every stored command into a payload mismatch, and is never made silently.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import hashlib
import json
import math
import uuid
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from inboxguard.errors import PayloadEncodingError

__all__ = ["canonical_json", "digest_of", "to_canonical"]

#: Prefix naming the algorithm, stored with every digest.
DIGEST_PREFIX = "sha256:"

_SCALARS = (str, int, bool, type(None))
_Exclusions = dict[str, "_Exclusions | None"]


def digest_of(payload: object, *, exclude: Iterable[str] = ()) -> str:
    """Return ``"sha256:<64 hex>"`` over the canonical JSON encoding of ``payload``.

    Equal payloads give equal digests in any process and Python version.
    ``exclude`` names volatile fields as dotted paths (``"trace_id"``,
    ``"meta.sent_at"``) that are left out; a path segment that meets a list
    applies to every element.

    Raises:
        PayloadEncodingError: a value has no canonical form (an unsupported type,
            a naive datetime, a non-string key, NaN or infinity); the error names
            its path.
    """
    encoded = canonical_json(payload, exclude=exclude).encode("utf-8")
    return DIGEST_PREFIX + hashlib.sha256(encoded).hexdigest()


def canonical_json(value: object, *, exclude: Iterable[str] = (), root: str = "payload") -> str:
    """Return the canonical JSON text that :func:`digest_of` hashes."""
    plain = to_canonical(value, exclude=exclude, root=root)
    return json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def to_canonical(value: object, *, exclude: Iterable[str] = (), root: str = "payload") -> Any:
    """Return ``value`` as plain JSON types (dict, list, str, int, float, bool, None).

    Raises:
        PayloadEncodingError: as for :func:`digest_of`.
    """
    return _Walker(root, _compile_exclusions(exclude)).walk(value, None)


def _compile_exclusions(paths: Iterable[str]) -> _Exclusions | None:
    if isinstance(paths, str):
        paths = (paths,)
    tree: _Exclusions = {}
    for path in paths:
        if not isinstance(path, str) or not path or any(not part for part in path.split(".")):
            msg = f"exclude path {path!r} is not a dotted field path such as 'meta.sent_at'"
            raise PayloadEncodingError(msg, path="exclude")
        node = tree
        *parents, leaf = path.split(".")
        for part in parents:
            child = node.get(part)
            if child is None:
                if part in node:  # a shorter path already excludes this subtree
                    break
                child = node[part] = {}
            node = child
        else:
            node[leaf] = None
    return tree or None


class _Walker:
    """Converts a payload to plain JSON types while tracking the path for errors."""

    def __init__(self, root: str, exclusions: _Exclusions | None) -> None:
        self.path: list[str] = [root]
        self.exclusions = exclusions

    def where(self) -> str:
        return "".join(self.path)

    def fail(self, reason: str) -> PayloadEncodingError:
        where = self.where()
        return PayloadEncodingError(f"{where}: {reason}", path=where)

    def walk(self, value: object, excl: _Exclusions | None) -> Any:  # noqa: PLR0911
        kind = type(value)
        if kind in _SCALARS:
            return value
        if kind is float:
            return self._float(value)  # type: ignore[arg-type]
        if isinstance(value, Mapping):
            return self._mapping(value, excl if excl is not None else self.exclusions)
        if isinstance(value, list | tuple):
            return self._sequence(value, excl)
        if isinstance(value, enum.Enum):
            return self.walk(value.value, excl)
        if isinstance(value, str | int):  # str and int subclasses, after Enum
            return str(value) if isinstance(value, str) else int(value)
        if isinstance(value, float):
            return self._float(float(value))
        return self._other(value, excl)

    def _float(self, value: float) -> float:
        if not math.isfinite(value):
            raise self.fail(f"{value!r} has no JSON form; send it as a string or leave it out")
        return value

    def _mapping(self, value: Mapping[Any, Any], excl: _Exclusions | None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                self.path.append(f"[{key!r}]")
                raise self.fail(f"key {key!r} is a {type(key).__name__}; keys must be str")
            sub: _Exclusions | None = None
            if excl is not None and key in excl:
                sub = excl[key]
                if sub is None:
                    continue
            self.path.append(f"[{key!r}]")
            out[key] = self.walk(item, sub if sub is not None else _NO_EXCLUSIONS)
            self.path.pop()
        return out

    def _sequence(self, value: list[Any] | tuple[Any, ...], excl: _Exclusions | None) -> list[Any]:
        out = []
        for index, item in enumerate(value):
            self.path.append(f"[{index}]")
            out.append(self.walk(item, excl))
            self.path.pop()
        return out

    def _other(self, value: object, excl: _Exclusions | None) -> Any:
        if isinstance(value, Decimal):
            if not value.is_finite():
                raise self.fail(f"{value!r} has no JSON form; send it as a string or leave it out")
            return str(value)
        if isinstance(value, uuid.UUID):
            return str(value)
        if isinstance(value, dt.datetime):
            if value.tzinfo is None or value.utcoffset() is None:
                raise self.fail(
                    f"{value!r} is a naive datetime; attach a timezone (e.g. tzinfo=UTC)"
                )
            return value.astimezone(dt.UTC).isoformat()
        if isinstance(value, dt.date):
            return value.isoformat()
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            return self._mapping(fields, excl if excl is not None else self.exclusions)
        dump = getattr(value, "model_dump", None)
        if callable(dump):
            return self.walk(dump(), excl)
        raise self.fail(
            f"values of type {type(value).__name__} have no canonical encoding; convert it"
            " to str, int, Decimal, a dict or a list, or exclude the field"
        )


#: Marker for "inside a subtree with no exclusions" (distinct from "at the root").
_NO_EXCLUSIONS: _Exclusions = {}
