"""L12: the ledger's Alembic branch builds exactly what create_schema() builds."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Engine

from inboxguard import EffectLedger
from inboxguard.migrations import VERSION_LOCATION
from integrations.ledger.gateway import SandboxGateway
from tests.migrations.test_alembic import _shape


def test_l12_alembic_branch_matches_create_schema(
    engine: Engine, db_url: str, prefix: str, tmp_path: Path
) -> None:
    cfg = Config(str(tmp_path / "alembic.ini"))
    command.init(cfg, str(tmp_path / "env"))
    cfg.set_main_option("script_location", str(tmp_path / "env"))
    cfg.set_main_option("sqlalchemy.url", db_url.replace("%", "%%"))
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("version_locations", VERSION_LOCATION)
    cfg.set_main_option("inboxguard_table_prefix", prefix + "a_")
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
