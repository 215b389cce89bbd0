"""P23: ``explain --json`` names the evidence's digest ``stored_digest``, the
name each quarantine record uses beside its ``incoming_digest``."""

from __future__ import annotations

import json

import pytest
from sqlalchemy.orm import Session

import inboxguard
from inboxguard.cli import main


def test_p23_the_evidence_digest_is_named_stored_digest(
    inbox: inboxguard.Inbox, db_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Session(inbox.engine) as session, session.begin():
        with inbox.guard(session, consumer="orders", command_id="o-1", payload={"n": 1}):
            pass
    with (
        pytest.raises(inboxguard.PayloadMismatchError),
        Session(inbox.engine) as session,
        session.begin(),
        inbox.guard(session, consumer="orders", command_id="o-1", payload={"n": 2}),
    ):
        pass
    argv = ["explain", "orders", "o-1", "--db", db_url, "--prefix", prefix, "--json"]
    assert main(argv) == 0
    why = json.loads(capsys.readouterr().out)
    [refused] = why["quarantine"]
    assert why["evidence"]["stored_digest"] == inboxguard.digest_of({"n": 1})
    assert why["evidence"]["stored_digest"] == refused["record"]["stored_digest"]
    assert refused["record"]["incoming_digest"] == inboxguard.digest_of({"n": 2})
