"""Deprecated alias of :mod:`inboxguard` (moved in 0.2); import from there instead."""

from __future__ import annotations

import warnings

from inboxguard import RetentionPolicy, WindowRow

__all__ = ["RetentionPolicy", "WindowRow"]

warnings.warn(
    "inboxguard.retention is deprecated; import from inboxguard",
    DeprecationWarning,
    stacklevel=2,
)
