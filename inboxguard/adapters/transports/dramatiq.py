"""Deprecated alias of :mod:`inboxguard.adapters.dramatiq.transport`.

Moved in 0.2; import from the new module instead.
"""

from __future__ import annotations

import warnings

from inboxguard.adapters.dramatiq.transport import DramatiqTransport

__all__ = ["DramatiqTransport"]

warnings.warn(
    "inboxguard.adapters.transports.dramatiq is deprecated; import from"
    " inboxguard.adapters.dramatiq.transport",
    DeprecationWarning,
    stacklevel=2,
)
