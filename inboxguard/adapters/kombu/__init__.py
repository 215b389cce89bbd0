"""kombu consumers: a ``(body, message)`` callback that runs each command once.

See :func:`guarded`; the module docstring of ``_consumer`` tabulates every outcome.
"""

from __future__ import annotations

from inboxguard.adapters.kombu._consumer import (
    ATTEMPT_HEADER,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_RETRY_DELAY,
    RETRY_AT_HEADER,
    SENT_AT_HEADER,
    guarded,
)

__all__ = [
    "ATTEMPT_HEADER",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_RETRY_DELAY",
    "RETRY_AT_HEADER",
    "SENT_AT_HEADER",
    "guarded",
]
