"""The shipped Alembic revisions build exactly what create_schema() builds."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import inspect
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import Inbox
from inboxguard.migrations import VERSION_LOCATION


def _column(engine: Engine, column: Any) -> tuple[object, ...]:
    """A reflected column as this database spells it: the type with its length or
    precision, its character set and collation (``VARCHAR(255) CHARACTER SET utf8mb4
    COLLATE utf8mb4_bin`` on MariaDB), nullability and the collation on its own."""
    kind = column["type"]
    return (
        column["name"],
        str(kind.compile(dialect=engine.dialect)),
        getattr(kind, "length", None),
        getattr(kind, "collation", None),
        column["nullable"],
    )


def _shape(engine: Engine, prefix: str) -> dict[str, Any]:
    insp = inspect(engine)
    shape = {}
    for table in sorted(t for t in insp.get_table_names() if t.startswith(prefix)):
        short = table.removeprefix(prefix)
        shape[short] = {
            "columns": [_column(engine, c) for c in insp.get_columns(table)],
            "pk": insp.get_pk_constraint(table)["constrained_columns"],
            "indexes": sorted(
                (i["name"].replace(prefix, "P_"), tuple(i["column_names"]))
                for i in insp.get_indexes(table)
                if not i["name"].startswith("uq_")
            ),
            "unique": sorted(tuple(u["column_names"]) for u in insp.get_unique_constraints(table)),
        }
    return shape


def alembic_config(tmp_path: Path, db_url: str, table_prefix: str) -> Config:
    """A fresh Alembic environment whose versions are inboxguard's revisions.

    The Config has no file, so the generated env.py skips ``fileConfig()``,
    which would disable every existing logger (the inboxguard logger included)
    for the rest of the test run.
    """
    command.init(Config(str(tmp_path / "alembic.ini")), str(tmp_path / "env"))
    cfg = Config()
    cfg.set_main_option("script_location", str(tmp_path / "env"))
    cfg.set_main_option("sqlalchemy.url", db_url.replace("%", "%%"))
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("version_locations", VERSION_LOCATION)
    cfg.set_main_option("inboxguard_table_prefix", table_prefix)
    return cfg


def test_alembic_upgrade_matches_create_schema(
    engine: Engine, db_url: str, prefix: str, tmp_path: Path
) -> None:
    """`alembic upgrade inboxguard@head` then downgrade, next to create_schema()."""
    cfg = alembic_config(tmp_path, db_url, prefix + "a_")
    command.upgrade(cfg, "inboxguard@head")

    Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix + "b_").create_schema()
    migrated_shape = _shape(engine, prefix + "a_")
    assert set(migrated_shape) == {
        "inbox",
        "quarantine",
        "quarantine_actions",
        "quarantine_replays",
        "watermark",
    }
    assert migrated_shape == _shape(engine, prefix + "b_")
    columns = {c[0]: c for c in migrated_shape["inbox"]["columns"]}
    assert columns["command_id"][2] == columns["consumer"][2] == 255
    if engine.dialect.name == "mysql":  # G5: IDs compare exactly, never case-folded
        assert columns["command_id"][3] == columns["consumer"][3] == "utf8mb4_bin"
        assert columns["digest"][3] == "ascii_bin"

    migrated = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix + "a_")
    with Session(engine) as session, session.begin():
        with migrated.guard(session, consumer="c", command_id="x", payload={}) as entry:
            entry.result = 1
    assert migrated.lookup("c", "x").result == 1  # type: ignore[union-attr]

    command.downgrade(cfg, "inboxguard@base")
    assert _shape(engine, prefix + "a_") == {}
