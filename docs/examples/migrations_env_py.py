"""Add inboxguard's revisions from Python (env.py or a deploy script), then upgrade.

Runs Alembic's own `init` in a temporary directory and upgrades a SQLite file.
"""

import tempfile
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, inspect

here = Path(tempfile.mkdtemp())
command.init(Config(str(here / "alembic.ini")), str(here / "migrations"))
config = Config(str(here / "alembic.ini"))
config.set_main_option("sqlalchemy.url", f"sqlite:///{here / 'app.db'}")
mine = str(here / "migrations" / "versions")

# --8<-- [start:option]
import os

import inboxguard.migrations

config.set_main_option(
    "version_locations", os.pathsep.join([mine, inboxguard.migrations.VERSION_LOCATION])
)  # os.pathsep, because alembic.ini says path_separator = os
# --8<-- [end:option]

command.upgrade(config, "heads")
tables = set(inspect(create_engine(f"sqlite:///{here / 'app.db'}")).get_table_names())
assert {"inboxguard_inbox", "inboxguard_outbox", "inboxguard_effects"} <= tables, tables
