"""Load a documented example (a pytest file under docs/examples/) as a module,
so that a test module of this suite can collect its tests and fixtures."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from sqlalchemy import create_engine, make_url
from sqlalchemy.engine import Engine

from inboxguard.testing._plugin import _throwaway
from tests.conftest import PG_ADMIN_URL, require_service

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def load(name: str) -> dict[str, Any]:
    """The tests and fixtures of ``docs/examples/<name>``, by name."""
    spec = importlib.util.spec_from_file_location(
        f"docs_examples_{Path(name).stem}", EXAMPLES / name
    )
    assert spec is not None
    assert spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {k: v for k, v in vars(module).items() if not k.startswith("_")}


@pytest.fixture(params=["sqlite", "postgresql"])
def sqlite_and_postgresql(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """``inboxguard_database`` on SQLite, then on a PostgreSQL database of the
    test's own (the plugin's ``--inboxguard-db`` path)."""
    if request.param == "sqlite":
        engine = create_engine(f"sqlite:///{tmp_path / 'inboxguard.db'}")
        yield engine
        engine.dispose()
        return
    require_service("postgresql")
    with _throwaway(make_url(f"{PG_ADMIN_URL}/postgres")) as url:
        engine = create_engine(url)
        yield engine
        engine.dispose()
