"""Diagnostic details (message headers, arguments, provider answers) as JSON text."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["encode_details"]


def encode_details(details: Mapping[str, Any] | None) -> str | None:
    """Encode what is known of a message; never fails (unknown types use repr).

    Unlike a payload's canonical form this is for people, not for digests, so
    it takes any value rather than refusing one.
    """
    if details is None:
        return None
    return json.dumps(details, default=repr, sort_keys=True, ensure_ascii=False)
