"""Deprecated alias of :mod:`inboxguard` (moved in 0.2); import from there instead."""

from __future__ import annotations

import warnings

from inboxguard import PurgePlan, PurgeReport

__all__ = ["PurgePlan", "PurgeReport"]

warnings.warn(
    "inboxguard.purge is deprecated; import from inboxguard",
    DeprecationWarning,
    stacklevel=2,
)
