"""L11: ``inboxguard effects list|show|reconcile|resolve``."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from sqlalchemy import create_engine

from inboxguard import EffectLedger, EffectOutcomeUnknownError, EffectState
from inboxguard.cli import main
from integrations.ledger.gateway import SandboxGateway


def test_l11_cli_lists_shows_reconciles_and_resolves(
    sqlite_url: str,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    engine = create_engine(sqlite_url)
    ledger = EffectLedger(engine, table_prefix=prefix)
    ledger.create_schema()
    gateway = SandboxGateway(engine, table_prefix=prefix)
    gateway.create_schema()
    gateway.script = ["accept_then_timeout", "timeout"]
    for key in ("lost", "never"):
        with pytest.raises(EffectOutcomeUnknownError):
            ledger.execute(key, gateway, {"amount": 1})
    db = ["--db", sqlite_url, "--prefix", prefix]

    def run(*argv: str) -> tuple[int, object]:
        status = main(["effects", *argv, *db])
        return status, json.loads(capsys.readouterr().out or "null")

    status, listed = run("list", "--state", "unknown")
    assert status == 0
    assert isinstance(listed, list)
    assert sorted(item["effect_key"] for item in listed) == ["lost", "never"]
    status, shown = run("show", "lost")
    assert status == 0
    assert isinstance(shown, dict)
    assert shown["state"] == "unknown"
    assert [t["event"] for t in shown["history"]] == ["prepare", "unknown"]

    monkeypatch.setenv("LEDGER_CLI_URL", sqlite_url)
    monkeypatch.setenv("LEDGER_CLI_PREFIX", prefix)
    status, report = run(
        "reconcile", "--provider", "tests.effects.cli_provider:make", "--older-than", "0"
    )
    assert status == 0  # "never" is pending (inside the window), not for an operator
    assert isinstance(report, dict)
    assert (report["reconciled"], report["pending"]) == (["lost"], ["never"])
    assert gateway.requests() == 1  # reconcile only looked up

    status, resolved = run("resolve", "never", "--not-applied", "--note", "not in dashboard")
    assert status == 0
    assert isinstance(resolved, dict)
    assert (resolved["state"], resolved["applied"]) == ("reconciled", False)
    record = ledger.get("never")
    assert record is not None
    assert record.state is EffectState.RECONCILED

    assert main(["effects", "show", "missing", *db]) == 1
    assert main(["effects", "resolve", "lost", "--applied", "x", "--note", "n", *db]) == 2
    assert "only an unknown effect" in capsys.readouterr().err
    assert main(["effects", "reconcile", "--provider", "nope", *db]) == 2
    assert "must look like MODULE:ATTR" in capsys.readouterr().err


def test_l11_reconcile_exits_1_when_an_effect_needs_an_operator(
    sqlite_url: str,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Past the window of a provider without lookup, `reconcile` cannot settle an
    unknown effect: it sends nothing, lists it under needs_operator and exits 1."""
    engine = create_engine(sqlite_url)
    ledger = EffectLedger(engine, table_prefix=prefix)
    ledger.create_schema()
    gateway = SandboxGateway(engine, table_prefix=prefix, window=dt.timedelta(seconds=1))
    gateway.create_schema()
    gateway.script = ["accept_then_timeout"]
    with pytest.raises(EffectOutcomeUnknownError):
        ledger.execute("lost", gateway, {"amount": 1})
    monkeypatch.setenv("LEDGER_CLI_URL", sqlite_url)
    monkeypatch.setenv("LEDGER_CLI_PREFIX", prefix)
    provider = "tests.effects.cli_provider:make_without_lookup"
    argv = ["effects", "reconcile", "--provider", provider, "--older-than", "0"]

    status = main([*argv, "--db", sqlite_url, "--prefix", prefix])
    report = json.loads(capsys.readouterr().out)
    assert status == 1
    assert (report["needs_operator"], report["reconciled"], report["pending"]) == (["lost"], [], [])
    assert gateway.requests() == 1  # the first send only: reconcile never re-sends
    record = ledger.get("lost")
    assert record is not None
    assert record.state is EffectState.UNKNOWN
