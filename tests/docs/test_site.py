"""The documentation site builds in strict mode, with a generated CLI reference.

`mkdocs build --strict` fails on a link to a missing page, a link to an anchor
the target page does not have, a snippet include whose file is missing, a page
left out of the navigation and a docstring mkdocstrings cannot read. One build
serves every check in this module.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from inboxguard.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built with --strict into a temporary directory."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return out


def _subcommand_paths() -> list[str]:
    """Every command path the parser knows, such as ``inboxguard quarantine list``."""
    found: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        found.append(path)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")

    walk(build_parser(), "inboxguard")
    return found


def test_strict_build_passes(site: Path) -> None:
    """The build raised no warning (the fixture asserts it) and wrote every page
    the navigation names, the generated CLI and API references included."""
    for page in ("quickstart", "concepts", "failure-flows", "comparison", "api", "cli-reference"):
        assert (site / page / "index.html").is_file(), page
    assert (site / "index.html").is_file()


def test_cli_reference_lists_every_command(site: Path) -> None:
    """The CLI page is generated from the parser: each command has its anchor and
    its options, so a subcommand added in code appears without editing a page."""
    html = (site / "cli-reference" / "index.html").read_text(encoding="utf-8")
    paths = _subcommand_paths()
    assert len(paths) > 5
    for path in paths:
        anchor = path.replace(" ", "-")
        assert f'id="{anchor}"' in html, f"no section for `{path}` in the CLI reference"
    assert "--db" in html


def test_api_reference_documents_every_public_name(site: Path) -> None:
    """Each name in ``inboxguard.__all__`` has an entry in the API reference."""
    import inboxguard

    html = (site / "api" / "index.html").read_text(encoding="utf-8")
    missing = [name for name in inboxguard.__all__ if f'id="inboxguard.{name}"' not in html]
    assert not missing, f"not in docs/api.md's output: {missing}"
    assert ":class:" not in html  # docs/hooks/sphinx_roles.py strips the Sphinx roles


def _error_classes() -> list[type]:
    import inboxguard

    found, todo = [], [inboxguard.InboxGuardError]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls is not inboxguard.InboxGuardError and cls.__module__.startswith("inboxguard"):
            found.append(cls)
    return found


def test_every_error_code_has_its_anchor(site: Path) -> None:
    """An error's message ends with ``docs/errors.md#<code>``: that anchor exists
    on the errors page for every error class, new ones included."""
    html = (site / "errors" / "index.html").read_text(encoding="utf-8")
    classes = _error_classes()
    assert len(classes) > 10
    missing = sorted({c.code for c in classes if f'id="{c.code}"' not in html})
    assert not missing, f"docs/errors.md has no heading for: {missing}"
