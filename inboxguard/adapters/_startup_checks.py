"""What every worker checks before it consumes a message.

Imports no framework; the Celery and Dramatiq start-up hooks call these and
refuse to start on the error.
"""

from __future__ import annotations

from sqlalchemy import inspect

from inboxguard import Inbox
from inboxguard.errors import ConfigurationError

__all__ = ["require_tables"]


def require_tables(inbox: Inbox) -> None:
    """Refuse a database without the inbox's tables.

    A worker that started there would fail every delivery, and a framework
    that acks failures would ack them all away.

    Raises:
        ConfigurationError: a table is missing, or the database cannot be
            inspected; the message names ``create_schema()``.
    """
    check = getattr(inbox, "check_schema", None)
    if callable(check):
        check()
        return
    names = (inbox.tables.inbox.name, inbox.tables.quarantine.name)
    try:
        inspector = inspect(inbox.engine)
        schema = inbox.tables.inbox.schema
        missing = [name for name in names if not inspector.has_table(name, schema=schema)]
    except Exception as error:
        msg = f"cannot check the inbox tables {', '.join(names)}: {error}"
        raise ConfigurationError(msg) from error
    if missing:
        msg = (
            f"the database has no inbox table {', '.join(missing)}; create them with"
            " Inbox.create_schema() or the Alembic revisions (docs/migrations.md)"
            " before starting a worker"
        )
        raise ConfigurationError(msg)
