"""L11: ``inboxguard effects list|show|reconcile|resolve``. P19: ``list``
pages through every effect with a total and an ``--after`` cursor."""

from __future__ import annotations

import datetime as dt
import json
import shlex

import pytest
from sqlalchemy import create_engine, insert

from inboxguard import EffectLedger, EffectOutcomeUnknownError, EffectState
from inboxguard.cli import main
from inboxguard.sql.tables import effect_tables
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
        status = main(["effects", *argv, *db, "--json"])
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

    status = main([*argv, "--db", sqlite_url, "--prefix", prefix, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert status == 1
    assert (report["needs_operator"], report["reconciled"], report["pending"]) == (["lost"], [], [])
    assert gateway.requests() == 1  # the first send only: reconcile never re-sends
    record = ledger.get("lost")
    assert record is not None
    assert record.state is EffectState.UNKNOWN


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
def test_p19_list_pages_through_every_effect_with_a_total(
    db_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = create_engine(db_url)
    ledger = EffectLedger(engine, table_prefix=prefix)
    ledger.create_schema()
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    rows = [  # 45 unknown, seven at a time updated at the same instant; 3 confirmed
        {
            "effect_key": f"invoice-{n}/charge",
            "provider": "sandbox",
            "digest": "0" * 64,
            "state": "unknown" if n < 45 else "confirmed",
            "version": 2,
            "fencing_token": 1,
            "attempts": 1,
            "first_sent_at": base,
            "created_at": base,
            "updated_at": base + dt.timedelta(seconds=n // 7),
        }
        for n in range(48)
    ]
    with engine.begin() as conn:
        conn.execute(insert(effect_tables(prefix).effects), rows)
    db = ["--db", db_url, "--prefix", prefix]
    try:
        seen: list[str] = []
        sizes: list[int] = []
        after: list[str] = []
        for _ in range(10):  # a cursor that never ends stops here
            argv = ["effects", "list", "--state", "unknown", "--limit", "10", *after, *db]
            assert main(argv) == 0
            *lines, last = capsys.readouterr().out.strip().splitlines()
            page = [line.split()[0] for line in lines[1:]]  # below the header
            seen, sizes = seen + page, [*sizes, len(page)]
            assert last.startswith(f"{len(page)} shown of 45 unknown effects")
            if "next page: " not in last:
                break
            after = shlex.split(last.split("next page: ", 1)[1])
        assert sizes == [10, 10, 10, 10, 5]
        assert sorted(seen) == sorted(r["effect_key"] for r in rows[:45])
        assert len(seen) == len(set(seen))

        assert main(["effects", "list", "--limit", "47", "--json", *db]) == 0
        *_, item = json.loads(capsys.readouterr().out)
        assert main(["effects", "list", "--after", item["cursor"], "--json", *db]) == 0
        assert [i["effect_key"] for i in json.loads(capsys.readouterr().out)] == [
            "invoice-47/charge"
        ]

        assert main(["effects", "list", "--after", "yesterday", *db]) == 2
        assert "--after 'yesterday' is not an effect page cursor" in capsys.readouterr().err
    finally:
        ledger.drop_schema()
        engine.dispose()
