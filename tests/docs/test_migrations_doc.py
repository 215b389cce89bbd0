"""docs/migrations.md's Alembic setup works with the Alembic that is installed.

The test does what the page tells a user to do: `alembic init`, put the
documented `[alembic]` lines (docs/examples/migrations_alembic.ini) into the
generated alembic.ini with the printed VERSION_LOCATION in place of the
placeholder, then run every `alembic ...` command of the page's shell blocks
against a SQLite file.
"""

from __future__ import annotations

import configparser
import json
import shlex
import subprocess
import sys
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, inspect

from inboxguard.migrations import VERSION_LOCATION
from tests.docs.pages import DOCS, EXAMPLES, blocks

PLACEHOLDER = "/path/printed/below"


_RUNNER = """
import json, sys
from alembic.config import main
codes = []
for argv in json.loads(sys.argv[1]):
    print("@@command", flush=True)
    try:
        main(argv=argv)
        codes.append(0)
    except SystemExit as exc:
        codes.append(exc.code or 0)
    sys.stdout.flush()
print("@@codes", json.dumps(codes))
"""


def _alembic(cwd: Path, *commands: list[str]) -> list[tuple[int, str]]:
    """Run alembic commands in order, in one interpreter (Alembic imports are slow);
    (exit status, output) of each."""
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, json.dumps(list(commands))],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "@@codes" in proc.stdout, proc.stdout + proc.stderr
    body, codes = proc.stdout.rsplit("@@codes", 1)
    outputs = body.split("@@command\n")[1:]
    return list(zip(json.loads(codes), outputs, strict=True))


def _project(tmp_path: Path, documented: dict[str, str]) -> Path:
    """An `alembic init` project whose [alembic] section has ``documented`` applied."""
    ini = tmp_path / "alembic.ini"
    command.init(Config(str(ini)), str(tmp_path / "migrations"))  # `alembic init migrations`
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ini)
    for key, value in documented.items():
        parser["alembic"][key] = value.replace(PLACEHOLDER, VERSION_LOCATION)
    parser["alembic"]["sqlalchemy.url"] = f"sqlite:///{tmp_path / 'app.db'}"
    with ini.open("w") as out:
        parser.write(out)
    return tmp_path


def _documented_lines() -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(EXAMPLES / "migrations_alembic.ini")
    return dict(parser["alembic"])


def _documented_commands() -> list[list[str]]:
    commands = []
    for block in blocks(DOCS / "migrations.md"):
        if block.lang in {"sh", "bash", "console"}:
            for line in block.body:
                words = shlex.split(line.strip().removeprefix("$ "), comments=True)
                if words[:1] == ["alembic"]:
                    commands.append(words[1:])
    return commands


def test_the_documented_config_upgrades_every_branch(tmp_path: Path) -> None:
    """Each `alembic upgrade` line of the page succeeds and creates its tables;
    `alembic heads` lists the inboxguard branch, as the page says to check."""
    documented = _documented_lines()
    assert documented["path_separator"] == "os"  # what `alembic init` writes today
    project = _project(tmp_path, documented)
    commands = _documented_commands()
    assert len(commands) >= 3, commands
    *results, (_, heads) = _alembic(project, *commands, ["heads"])
    for args, (code, out) in zip(commands, results, strict=True):
        assert code == 0, f"alembic {shlex.join(args)} exited {code}: {out}"
    tables = set(inspect(create_engine(f"sqlite:///{project / 'app.db'}")).get_table_names())
    expected = {"inbox", "quarantine", "watermark", "quarantine_replays", "outbox", "effects"}
    assert {f"inboxguard_{t}" for t in expected} <= tables, tables
    assert "(inboxguard)" in heads, heads


def test_a_space_separated_list_finds_nothing(tmp_path: Path) -> None:
    """The form the page used to show: with `path_separator = os`, Alembic reads
    the two paths as one, finds no revision and upgrades nothing, with exit 0.
    This is why the page warns about it."""
    documented = _documented_lines()
    documented["version_locations"] = documented["version_locations"].replace(":", " ")
    project = _project(tmp_path, documented)
    (code, _), (_, heads) = _alembic(project, ["upgrade", "inboxguard@head"], ["heads"])
    tables = set(inspect(create_engine(f"sqlite:///{project / 'app.db'}")).get_table_names())
    assert "inboxguard_inbox" not in tables, (code, tables)
    assert "(inboxguard)" not in heads
