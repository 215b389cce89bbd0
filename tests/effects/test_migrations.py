"""L12: the ledger's Alembic branch builds exactly what create_schema() builds."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from sqlalchemy.engine import Engine

from inboxguard import EffectLedger
from integrations.ledger.gateway import SandboxGateway
from tests.sql.migrations.test_alembic import _shape, alembic_config


def test_l12_alembic_branch_matches_create_schema(
    engine: Engine, db_url: str, prefix: str, tmp_path: Path
) -> None:
    cfg = alembic_config(tmp_path, db_url, prefix + "a_")
    command.upgrade(cfg, "inboxguard_effects@head")

    EffectLedger(engine, table_prefix=prefix + "b_").create_schema()
    migrated = _shape(engine, prefix + "a_")
    assert set(migrated) == {"effects", "effect_history"}
    assert migrated == _shape(engine, prefix + "b_")

    ledger = EffectLedger(engine, table_prefix=prefix + "a_")
    gateway = SandboxGateway(engine, table_prefix=prefix + "g_")
    gateway.create_schema()
    assert ledger.execute("k", gateway, {"amount": 1}).reference == "ch_1"

    command.downgrade(cfg, "inboxguard_effects@base")
    assert _shape(engine, prefix + "a_") == {}
    gateway.drop_schema()
    EffectLedger(engine, table_prefix=prefix + "b_").drop_schema()
