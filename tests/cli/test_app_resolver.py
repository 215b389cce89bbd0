"""One resolver for every ``--app``: ``module:factory()`` calls a factory (an
``async def`` one is run to completion) and a ``SystemExit`` raised by the
application is exit status 2, for ``guarantees``, ``doctor`` and
``retention explain`` alike."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from inboxguard.cli import main
from tests.conftest import unique

APP = """
import asyncio
import datetime as dt
import os
from sqlalchemy import create_engine
import inboxguard

BUILT = []


def _inbox():
    engine = create_engine({url!r})
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(hours=1), table_prefix={prefix!r})
    inbox.create_schema()

    @inbox.handler(consumer="billing.charge", command_id="invoice")
    def charge(session, invoice):
        return invoice

    BUILT.append(inbox)
    return inbox


def build():
    return _inbox()


async def build_async():
    await asyncio.sleep(0)
    return _inbox()


def needs_settings():
    raise SystemExit("set APP_DATABASE_URL")
"""

EXITS_ON_IMPORT = """
raise SystemExit("set APP_DATABASE_URL before importing this module")
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An application module in a fresh project directory, run from its root."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    name = unique("proj")
    source = APP.format(url=f"sqlite:///{tmp_path / 'app.db'}", prefix=unique("rs") + "_")
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    (tmp_path / f"{name}_exits.py").write_text(EXITS_ON_IMPORT)
    return name


def test_every_app_command_calls_a_factory_and_runs_an_async_one(
    project: str, capsys: pytest.CaptureFixture[str]
) -> None:
    built = sys.modules.get(project)
    assert main(["guarantees", "--app", f"{project}:build()"]) == 0
    assert "## `billing.charge`" in capsys.readouterr().out
    assert main(["retention", "explain", "--app", f"{project}:build_async()"]) == 0
    assert "horizon 1h" in capsys.readouterr().out  # the factory's inbox's policy
    assert main(["doctor", "--app", f"{project}:build_async()", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["framework"] == "inbox"
    assert {c["check"]: c["status"] for c in report["checks"]}["tables"] == "ok"
    assert built is None
    # each command called the factory once: the async ones were awaited to an Inbox
    assert len(sys.modules[project].BUILT) == 3


@pytest.mark.parametrize("command", [["guarantees"], ["doctor"], ["retention", "explain"]])
def test_a_system_exit_of_the_application_is_exit_2_naming_it(
    project: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "--app", f"{project}_exits:app"]) == 2
    err = capsys.readouterr().err
    assert "SystemExit: set APP_DATABASE_URL before importing this module" in err
    assert f"--app '{project}_exits:app'" in err
    assert main([*command, "--app", f"{project}:needs_settings()"]) == 2
    assert "calling the factory failed: SystemExit: set APP_DATABASE_URL" in capsys.readouterr().err


def test_a_factory_that_is_not_callable_and_an_empty_call_are_refused(
    project: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--app", f"{project}:BUILT()"]) == 2
    assert "is not callable; drop the ()" in capsys.readouterr().err
    assert main(["guarantees", "--app", f"{project}:()"]) == 2
    assert "must look like MODULE:ATTR" in capsys.readouterr().err
