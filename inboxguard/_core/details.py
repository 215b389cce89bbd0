"""Diagnostic details (message headers, arguments, provider answers) as JSON text."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["encode_details"]


def encode_details(details: Mapping[str, Any] | None) -> str | None:
    """Encode what is known of a message; never fails.

    Unlike a payload's canonical form this is for people, not for digests, so
    it takes any value rather than refusing one: unknown types use ``repr``;
    details that still cannot be encoded (non-string keys, a cycle, a huge
    int, a failing ``repr``) are kept as their ``repr`` under
    ``"unencodable_details"``; lone surrogates are escaped. A refusal is
    therefore never replaced by an error about its own details.
    """
    if details is None:
        return None
    try:
        text = json.dumps(details, default=_repr, sort_keys=True, ensure_ascii=False)
    except Exception as error:  # anything: the record must still be written
        text = json.dumps(
            {"unencodable_details": _repr(details), "error": _repr(error)}, ensure_ascii=False
        )
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _repr(value: object) -> str:
    try:
        return repr(value)
    except Exception:  # a broken __repr__ must not lose the record
        return f"<unprintable {type(value).__name__}>"
