"""Alembic migrations for inboxguard's tables, for projects that manage their
schema with Alembic instead of calling ``create_schema()``.

Add :data:`VERSION_LOCATION` to ``version_locations`` in ``alembic.ini`` and
upgrade the ``inboxguard`` branch::

    path_separator = os
    version_locations = %(here)s/migrations/versions:<VERSION_LOCATION>
    inboxguard_table_prefix = inboxguard_

    $ alembic upgrade inboxguard@head

The migrations are frozen snapshots: a release that changes a table ships a
new revision on the branch, never an edit of an old one.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BRANCH", "VERSION_LOCATION", "table_prefix"]

#: Directory holding inboxguard's revisions; add it to ``version_locations``.
VERSION_LOCATION = str(Path(__file__).resolve().parent / "versions")
#: The Alembic branch label of inboxguard's revisions.
BRANCH = "inboxguard"
#: Default table prefix, as in ``Inbox(table_prefix=...)``.
DEFAULT_PREFIX = "inboxguard_"


def table_prefix() -> str:
    """The prefix the migrations use: ``inboxguard_table_prefix`` from the
    Alembic config (``alembic.ini`` or ``Config.set_main_option``), else
    ``inboxguard_``."""
    from alembic import context  # noqa: PLC0415 - only inside a running migration

    from inboxguard.sql.tables import check_prefix  # noqa: PLC0415 - with alembic only

    return check_prefix(context.config.get_main_option("inboxguard_table_prefix") or DEFAULT_PREFIX)
