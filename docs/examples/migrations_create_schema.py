"""create_schema(): the tables without Alembic, idempotent."""

from datetime import timedelta

from sqlalchemy import create_engine, inspect

import inboxguard

engine = create_engine("sqlite://")
inbox = inboxguard.Inbox(engine, retention=timedelta(days=7))

# --8<-- [start:create]
inbox.create_schema()  # CREATE TABLE IF NOT EXISTS for the inbox's four tables
# --8<-- [end:create]
inbox.create_schema()  # a second call changes nothing
inbox.check_schema()  # raises ConfigurationError when a table is missing
assert {"inboxguard_inbox", "inboxguard_quarantine"} <= set(inspect(engine).get_table_names())
