"""Canonical payload encodings and the payload digest.

The digest is ``"sha256:" + hex(sha256(digest text))``. The digest text is
compact JSON with sorted keys and UTF-8 text in which every number is written
by its value (see :func:`digest_text` and the number rules in the inbox
guide), so key order, formatting and a producer that re-serialises numbers
never change a digest. The test vectors in ``tests/core/test_digest.py`` pin
it: a change that breaks them would turn stored commands into payload
mismatches. One digest is accepted, never a second form beside it: a stored
``"1"`` (text) and a redelivered ``Decimal("1")`` (a number) are two values.

:func:`canonical_json` is the stored form (outbox payloads, results): the same
walk, numbers kept as given (``Decimal`` as its text).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from inboxguard._core.canonical import (
    MAX_DEPTH,
    MAX_NUMBER_DIGITS,
    Walker,
    compact_json,
    emit,
    plain_text,
)
from inboxguard._core.exclusions import ExcludePath, compile_exclusions

__all__ = [
    "DIGEST_PREFIX",
    "MAX_DEPTH",
    "MAX_NUMBER_DIGITS",
    "canonical_json",
    "digest_of",
    "digest_text",
    "to_canonical",
]

#: Prefix naming the algorithm, stored with every digest.
DIGEST_PREFIX = "sha256:"

Exclude = Iterable[ExcludePath] | str


def digest_of(payload: object, *, exclude: Exclude = ()) -> str:
    """Return ``"sha256:<64 hex>"`` over the digest text of ``payload``.

    Equal payloads give equal digests in any process and Python version;
    numbers compare by value (``1``, ``1.0`` and ``Decimal("1.00")`` are one
    number). ``exclude`` names volatile fields as dotted paths
    (``"trace_id"``, ``"meta.sent_at"``) or tuples of keys
    (``("meta", "sent.at")``) that are left out; a segment that meets a list
    applies to every element.

    Raises:
        PayloadEncodingError: a value has no canonical form (an unsupported type,
            a naive datetime, a non-string key, NaN or infinity, a number of
            more than 4300 digits, a lone surrogate, a cycle, nesting deeper
            than 100 levels) or ``exclude`` leaves nothing; the error names
            the path.
    """
    return _hash(digest_text(payload, exclude=exclude))


def digest_text(payload: object, *, exclude: Exclude = (), root: str = "payload") -> str:
    """Return the text :func:`digest_of` hashes (numbers written by value)."""
    exclusions = compile_exclusions(exclude)
    if not exclusions and (text := plain_text(payload, by_value=True)) is not None:
        return text
    return emit(Walker(root, exclusions, by_value=True).run(payload))


def canonical_json(value: object, *, exclude: Exclude = (), root: str = "payload") -> str:
    """Return the stored form: compact, key-sorted JSON, numbers as given."""
    exclusions = compile_exclusions(exclude)
    if not exclusions and (text := plain_text(value, by_value=False)) is not None:
        return text
    return compact_json(Walker(root, exclusions, by_value=False).run(value))


def to_canonical(value: object, *, exclude: Exclude = (), root: str = "payload") -> Any:
    """Return ``value`` as plain JSON types (dict, list, str, int, float, bool, None).

    Raises:
        PayloadEncodingError: as for :func:`digest_of`.
    """
    return Walker(root, compile_exclusions(exclude), by_value=False).run(value)


def _hash(text: str) -> str:
    return DIGEST_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()
