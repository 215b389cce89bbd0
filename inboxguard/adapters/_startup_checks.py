"""What every worker checks before it consumes a message.

Imports no framework; the Celery and Dramatiq start-up hooks call these and
refuse to start on the error.
"""

from __future__ import annotations

from inboxguard.adapters._stores import AnyInbox
from inboxguard.errors import ConfigurationError

__all__ = ["require_tables"]


def require_tables(inbox: AnyInbox) -> None:
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
