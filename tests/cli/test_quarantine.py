"""``inboxguard quarantine list|show|resolve`` on each supported database."""

from __future__ import annotations

import json

import pytest
from sqlalchemy.orm import Session

import inboxguard
from inboxguard.cli import main


def _refuse(inbox: inboxguard.Inbox, consumer: str, command_id: str) -> None:
    """Apply ``command_id`` once, then deliver it again with another payload."""
    with Session(inbox.engine) as session, session.begin():
        with inbox.guard(session, consumer=consumer, command_id=command_id, payload={"n": 1}):
            pass
    with (
        pytest.raises(inboxguard.PayloadMismatchError),
        Session(inbox.engine) as session,
        session.begin(),
        inbox.guard(
            session,
            consumer=consumer,
            command_id=command_id,
            payload={"n": 2},
            details={"headers": {"trace": "t-9"}},
        ),
    ):
        pass


def test_list_show_and_resolve_refused_messages(
    inbox: inboxguard.Inbox, db_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _refuse(inbox, "billing", "c-1")
    _refuse(inbox, "shipping", "c-2")
    db = ["--db", db_url, "--prefix", prefix]

    def run(*argv: str) -> tuple[int, object]:
        status = main(["quarantine", *argv, *db])
        return status, json.loads(capsys.readouterr().out or "null")

    status, listed = run("list")
    assert status == 0
    assert isinstance(listed, list)
    assert [(r["consumer"], r["command_id"], r["reason"]) for r in listed] == [
        ("billing", "c-1", "payload_mismatch"),
        ("shipping", "c-2", "payload_mismatch"),
    ]
    status, only = run("list", "--consumer", "shipping")
    assert isinstance(only, list)
    assert [r["command_id"] for r in only] == ["c-2"]
    first = listed[0]["id"]

    status, shown = run("show", str(first))
    assert status == 0
    assert isinstance(shown, dict)
    assert shown["details"]["headers"] == {"trace": "t-9"}
    assert shown["stored_digest"] == inboxguard.digest_of({"n": 1})
    assert shown["incoming_digest"] == inboxguard.digest_of({"n": 2})

    status, resolved = run("resolve", str(first))
    assert (status, resolved["status"]) == (0, "resolved")  # type: ignore[index]
    assert run("resolve", str(first)) == (1, None)  # no longer open
    assert [r.command_id for r in inbox.quarantined()] == ["c-2"]
    status, every = run("list", "--status", "all")
    assert isinstance(every, list)
    assert [r["status"] for r in every] == ["resolved", "open"]

    # Resolving changes no evidence: the same mismatch is refused again.
    _refuse(inbox, "billing", "c-1")
    assert {r.command_id for r in inbox.quarantined()} == {"c-1", "c-2"}


def test_bad_input_names_the_fix(
    inbox: inboxguard.Inbox, db_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["quarantine", "list", "--db", db_url, "--prefix", "nope_"]) == 2
    assert "check --prefix" in capsys.readouterr().err
    assert main(["quarantine", "show", "999", "--db", db_url, "--prefix", prefix]) == 1
    assert "no record with ID 999" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["quarantine", "show", "zero", "--db", db_url, "--prefix", prefix])
    assert exit_info.value.code == 2
    assert "must be a positive integer" in capsys.readouterr().err


def test_without_a_database_url_it_says_which_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("INBOXGUARD_DB_URL", raising=False)
    assert main(["quarantine", "list", "--db", ""]) == 2
    assert "--db is required" in capsys.readouterr().err
