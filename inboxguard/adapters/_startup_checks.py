"""What every worker checks before it consumes a message.

Imports no framework; the Celery and Dramatiq start-up hooks call these and
refuse to start on the error.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from inboxguard import InboxStore
from inboxguard._core.retention import CheckedWindow, format_duration
from inboxguard.errors import ConfigurationError

__all__ = ["log_alignment_passed", "require_tables"]

logger = logging.getLogger("inboxguard")


def require_tables(inbox: InboxStore) -> None:
    """Refuse a database without the inbox's tables.

    A worker that started there would fail every delivery, and a framework
    that acks failures would ack them all away.

    Raises:
        ConfigurationError: a table is missing, or the database cannot be
            inspected; the message names ``create_schema()``.
    """
    try:
        inbox.check_schema()
    except ConfigurationError:
        raise
    except Exception as error:  # the database cannot even be inspected
        msg = f"cannot check the inbox tables before starting a worker: {error}"
        raise ConfigurationError(msg) from error


def log_alignment_passed(framework: str, guarded: int, windows: Iterable[CheckedWindow]) -> None:
    """Log, at INFO and on one line, that a worker's retention check passed:
    how many handlers are guarded and the window closest to its horizon."""
    checked = list(windows)
    if not checked:
        logger.info(
            "inboxguard: %s start-up checks passed: %d guarded handler(s), no replay window found",
            framework,
            guarded,
        )
        return
    closest = max(checked, key=lambda found: found.share)
    window = closest.window
    logger.info(
        "inboxguard: %s start-up checks passed: %d guarded handler(s), %d replay window(s)"
        " inside the evidence horizon; the closest, %s=%s (%s), fits inside %s",
        framework,
        guarded,
        len(checked),
        window.name,
        format_duration(window.bound),
        window.source,
        format_duration(closest.horizon),
    )
