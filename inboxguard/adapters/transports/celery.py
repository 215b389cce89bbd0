"""Deprecated alias of :mod:`inboxguard.adapters.celery.transport`.

Moved in 0.2; import from the new module instead.
"""

from __future__ import annotations

import warnings

from inboxguard.adapters.celery.transport import CeleryTransport

__all__ = ["CeleryTransport"]

warnings.warn(
    "inboxguard.adapters.transports.celery is deprecated; import from"
    " inboxguard.adapters.celery.transport",
    DeprecationWarning,
    stacklevel=2,
)
