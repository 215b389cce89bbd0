"""P16: a command's quarantine records are read in a bounded number of
queries, however many there are (``explain``, the dashboard's search). P18:
``explain`` of a command with thousands of records shows the oldest
``--limit`` of them with the total and the command that pages through the
rest, in the same statements and a bounded size."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from sqlalchemy import event, insert
from sqlalchemy.engine import Engine

import inboxguard
from inboxguard.cli import main


def _quarantine(inbox: inboxguard.Inbox, command_id: str, count: int) -> None:
    for n in range(count):
        inbox.quarantine_delivery(
            consumer="billing",
            command_id=command_id,
            payload={"n": n},
            reason=inboxguard.QuarantineReason.RETRIES_EXHAUSTED,
            details={"body": {"n": n}, "routing_key": "billing"},
        )


def _statements(engine: Engine, command_id: str, prefix: str) -> tuple[int, Any]:
    seen: list[str] = []

    def count(*args: Any) -> None:
        seen.append(args[2])

    event.listen(engine, "before_cursor_execute", count)
    try:
        told = inboxguard.explain(
            engine, consumer="billing", command_id=command_id, table_prefix=prefix
        )
    finally:
        event.remove(engine, "before_cursor_execute", count)
    return len(seen), told


@pytest.mark.parametrize("records", [3, 40])
def test_p16_explain_reads_every_record_of_a_command_in_bounded_queries(
    inbox: inboxguard.Inbox, engine: Engine, prefix: str, records: int
) -> None:
    _quarantine(inbox, "few", 2)
    _quarantine(inbox, "many", records)
    [first] = [r for r in inbox.quarantined("billing") if r.command_id == "many"][:1]
    inbox.resolve_quarantine(first.id, actor="ana", reason="checked")
    few, _ = _statements(engine, "few", prefix)
    many, told = _statements(engine, "many", prefix)
    assert len(told.quarantine) == records
    assert [a.actor for a in told.quarantine[0].actions] == ["ana"]
    assert all(d.actions == () for d in told.quarantine[1:])
    assert many == few  # the same statements for 2 records and for 40


def _bulk_quarantine(inbox: inboxguard.Inbox, command_id: str, count: int) -> None:
    """``count`` records of one command in one multi-row insert (the fast way to
    a command refused thousands of times); the first is resolved."""
    now = dt.datetime.now(dt.UTC)
    rows = [
        {
            "consumer": "billing",
            "command_id": command_id,
            "reason": "payload_mismatch",
            "incoming_digest": f"{n:064x}",
            "stored_digest": "0" * 64,
            "first_seen_at": now,
            "last_seen_at": now,
            "occurrences": 1,
            "status": "resolved" if n == 0 else "open",
            "details": json.dumps({"body": {"n": n, "note": "x" * 400}}),
        }
        for n in range(count)
    ]
    with inbox.engine.begin() as conn:
        conn.execute(insert(inbox.tables.quarantine), rows)


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
def test_p18_explain_of_a_command_with_thousands_of_records_is_bounded(
    inbox: inboxguard.Inbox,
    engine: Engine,
    db_url: str,
    prefix: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _quarantine(inbox, "few", 2)
    _bulk_quarantine(inbox, "many", 3000)
    few, _ = _statements(engine, "few", prefix)
    many, told = _statements(engine, "many", prefix)
    assert many == few  # the same statements for 2 records and for 3,000
    assert len(told.quarantine) == 100  # the default limit: the oldest 100
    assert (told.quarantine_total, told.quarantine_open) == (3000, 2999)
    assert "2999 quarantine record(s) are open" in told.summary

    base = ["explain", "billing", "many", "--db", db_url, "--prefix", prefix]
    assert main([*base, "--json"]) == 0
    out = capsys.readouterr().out
    shown = json.loads(out)
    assert len(shown["quarantine"]) == 100
    assert (shown["quarantine_total"], shown["quarantine_open"]) == (3000, 2999)
    last = shown["quarantine"][-1]["record"]["id"]
    assert shown["quarantine_rest"] == (
        f"inboxguard quarantine list --consumer billing --status all --prefix {prefix}"
        f" --after {last}"
    )
    assert len(out) < 150_000  # 3,000 records of ~500 bytes each would be 1.5 MB

    assert main([*base, "--limit", "5"]) == 0
    text = capsys.readouterr().out
    assert "quarantine records: 5 shown of 3000 (2999 open)" in text
    assert text.count("incoming_digest") == 5
    assert (
        main(
            [
                "quarantine",
                "list",
                "--db",
                db_url,
                "--prefix",
                prefix,
                "--consumer",
                "billing",
                "--status",
                "all",
                "--after",
                str(last),
                "--json",
            ]
        )
        == 0
    )
    assert len(json.loads(capsys.readouterr().out)) == 100  # the next page, as pointed to
