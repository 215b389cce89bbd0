"""P16: a command's quarantine records are read in a bounded number of
queries, however many there are (``explain``, the dashboard's search)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

import inboxguard


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
