"""Deprecated alias of :mod:`inboxguard.adapters._transport`.

Moved in 0.2; import from the new module instead.
"""

from __future__ import annotations

import warnings

from inboxguard.adapters._transport import split_payload

__all__ = ["split_payload"]

warnings.warn(
    "inboxguard.adapters.transports is deprecated; import from inboxguard.adapters._transport",
    DeprecationWarning,
    stacklevel=2,
)
