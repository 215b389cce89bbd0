"""Load a documented example (a pytest file under docs/examples/) as a module,
so that a test module of this suite can collect its tests and fixtures."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

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
