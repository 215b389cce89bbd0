"""X8: the demo plays every failure story and exits 0 only when every guarantee held."""

from __future__ import annotations

import io
import re
import runpy
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from inboxguard import ConfigurationError, cli, guarantees_markdown, guarantees_of
from inboxguard.testing import FakeProvider, ManualClock, demo
from inboxguard.testing.demo import _app
from tests.conftest import AMQP_URL, PG_ADMIN_URL, require_service

STORIES = (
    "duplicate deliveries",
    "two workers racing",
    "a crash after the provider accepted",
    "an expired lease",
    "a retry after the provider's window",
    "an ambiguous timeout, unknown until reconciled",
    "a mismatched payload",
    "a replay older than retention",
)


def test_x8_make_demo_plays_every_story_and_exits_0(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What ``make demo`` runs (integrations/demo.py), on SQLite and in memory."""
    monkeypatch.setattr("sys.argv", ["integrations/demo.py"])
    with pytest.raises(SystemExit) as done:
        runpy.run_module("integrations.demo", run_name="__main__")
    out = capsys.readouterr().out
    assert done.value.code == 0, out
    for number, title in enumerate(STORIES, 1):
        assert f"[{number}/8] {title} ..." in out
    assert out.count("deliveries  handler runs  provider requests  receipts  inbox") == 8
    assert out.count(" held\n") == 8
    assert "FAILED" not in out
    assert "OK: every guarantee held in 8 stories" in out
    _the_table_is_the_librarys(out, tmp_path)


def _the_table_is_the_librarys(out: str, tmp: Path) -> None:
    """The printed table is ``inboxguard guarantees``' Markdown for the demo
    handler, derived from the story's own inbox, ledger and provider (with
    the declared delivery mode), not text of the demo's own."""
    printed = out.split("as `inboxguard guarantees` shows it):\n\n", 1)[1]
    prefix = re.search(r"(dm[0-9a-f]{6}_)inbox", printed)
    assert prefix is not None, printed
    clock = ManualClock()
    app = _app.Billing(
        create_engine(f"sqlite:///{tmp / 'table.db'}"),
        prefix.group(1),
        clock,
        FakeProvider(clock=clock),
    )
    (table,) = guarantees_of(app.inbox)
    assert table.consumer == "billing.charge-invoice"
    assert table.fact("delivery_mode").source == "declared"  # type: ignore[union-attr]
    assert printed.startswith(guarantees_markdown([table]))
    app.drop()


def test_x8_the_same_stories_on_postgresql_and_rabbitmq() -> None:
    """``--db`` and ``--broker`` together (the Redis URL takes the same kombu path)."""
    require_service("postgresql")
    require_service("rabbitmq")
    out = io.StringIO()
    status = demo.run(db=f"{PG_ADMIN_URL}/postgres", broker=AMQP_URL, out=out)
    assert status == 0, out.getvalue()
    assert "postgresql+psycopg; kombu on amqp" in out.getvalue()
    assert out.getvalue().count(" held\n") == 8


def test_x8_a_broken_guarantee_fails_the_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    """A handler that charges the provider directly, without the ledger: the
    stories that re-send catch it and the demo exits 1."""

    def charge_blindly(self: _app.Billing, message: dict[str, Any]) -> dict[str, Any]:
        self.provider.send(f"invoice-{message['invoice']}/charge", dict(message))
        return {}

    monkeypatch.setattr(_app.Billing, "charge", charge_blindly)
    out = io.StringIO()
    assert demo.run(out=out) == 1
    assert "FAILED: " in out.getvalue()
    assert "    ! " in out.getvalue()


def test_x8_a_bad_option_is_named_with_its_fix(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigurationError, match=r"--broker 'kafka://.*redis:// or amqp://"):
        demo.run(broker="kafka://127.0.0.1:9092")
    with pytest.raises(ConfigurationError, match=r"--broker 'redis://127.0.0.1:1/0'.*running"):
        demo.run(broker="redis://127.0.0.1:1/0")
    assert cli.main(["demo", "--db", "nonsense://"]) == 2
    assert "inboxguard demo: --db 'nonsense://'" in capsys.readouterr().err
