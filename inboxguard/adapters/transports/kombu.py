"""Deprecated alias of :mod:`inboxguard.adapters.kombu.transport`.

Moved in 0.2; import from the new module instead.
"""

from __future__ import annotations

import warnings

from inboxguard.adapters.kombu.transport import KombuTransport

__all__ = ["KombuTransport"]

warnings.warn(
    "inboxguard.adapters.transports.kombu is deprecated; import from"
    " inboxguard.adapters.kombu.transport",
    DeprecationWarning,
    stacklevel=2,
)
