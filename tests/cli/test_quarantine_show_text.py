"""P21: ``inboxguard quarantine show ID`` in text prints the message the
adapter kept (body, headers, properties, the incoming arguments), on each
supported database."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.orm import Session

import inboxguard
from inboxguard.cli import main

KEPT = {
    "body": {"order": "o-7", "amount": 99},
    "headers": {"x-inbox-command-id": "o-7", "x-inbox-sent-at": "2026-12-01T10:00:00+00:00"},
    "properties": {"content_type": "application/json", "message_id": "m-1"},
    "args": ["o-7"],
    "kwargs": {"amount": 99},
    "routing_key": "orders",
}


def _refuse(inbox: inboxguard.Inbox, details: dict[str, Any] | None) -> int:
    with Session(inbox.engine) as session, session.begin():
        with inbox.guard(session, consumer="orders", command_id="o-7", payload={"n": 1}):
            pass
    with (
        pytest.raises(inboxguard.PayloadMismatchError),
        Session(inbox.engine) as session,
        session.begin(),
        inbox.guard(
            session, consumer="orders", command_id="o-7", payload={"n": 2}, details=details
        ),
    ):
        pass
    [record] = inbox.quarantined("orders")
    return record.id


def test_p21_show_prints_the_kept_message(
    inbox: inboxguard.Inbox, db_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    record_id = _refuse(inbox, KEPT)
    assert main(["quarantine", "show", str(record_id), "--db", db_url, "--prefix", prefix]) == 0
    out = capsys.readouterr().out
    assert "details" not in out  # no bare "kept": the message itself is shown
    lines = out.splitlines()
    start = lines.index("message:")
    shown = lines[start + 1 :]
    assert shown[:2] == ['  body: {"amount": 99, "order": "o-7"}', '  args: ["o-7"]']
    assert '  kwargs: {"amount": 99}' in shown
    assert '    x-inbox-sent-at: "2026-12-01T10:00:00+00:00"' in shown
    assert '    content_type: "application/json"' in shown
    assert '  routing_key: "orders"' in shown


def test_p21_a_record_without_details_says_so(
    inbox: inboxguard.Inbox, db_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    record_id = _refuse(inbox, None)
    assert main(["quarantine", "show", str(record_id), "--db", db_url, "--prefix", prefix]) == 0
    assert "message: not kept" in capsys.readouterr().out
