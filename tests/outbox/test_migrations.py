"""The outbox's Alembic branch builds exactly what create_schema() builds."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import Outbox
from tests.sql.migrations.test_alembic import _shape, alembic_config


def test_outbox_alembic_branch_matches_create_schema(
    engine: Engine, db_url: str, prefix: str, tmp_path: Path
) -> None:
    """`alembic upgrade inboxguard_outbox@head`, compared with create_schema(), then down."""
    cfg = alembic_config(tmp_path, db_url, prefix + "a_")
    command.upgrade(cfg, "inboxguard_outbox@head")

    Outbox(engine, table_prefix=prefix + "b_").create_schema()
    migrated = _shape(engine, prefix + "a_")
    assert set(migrated) == {"outbox"}
    assert migrated == _shape(engine, prefix + "b_")

    outbox = Outbox(engine, table_prefix=prefix + "a_")
    with Session(engine) as session, session.begin():
        assert outbox.add(session, command_id="c-1", destination="q", payload={"a": 1})
    assert outbox.status().backlog == 1

    command.downgrade(cfg, "inboxguard_outbox@base")
    assert _shape(engine, prefix + "a_") == {}
    Outbox(engine, table_prefix=prefix + "b_").drop_schema()
