"""``inboxguard stats|explain|quarantine release|resolve`` and the read model
under them (``inboxguard.stats``, ``explain``, ``release_quarantine``...), on
each supported database (P1-P3)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

import inboxguard
from inboxguard.cli import main
from integrations.ledger.gateway import SandboxGateway
from tests.conftest import FakeClock, unique


def _apply(inbox: inboxguard.Inbox, consumer: str, command_id: str, payload: Any) -> bool:
    """Deliver a command; True when its body ran (it was fresh)."""
    with Session(inbox.engine) as session, session.begin():
        with inbox.guard(
            session, consumer=consumer, command_id=command_id, payload=payload
        ) as entry:
            ran = not entry.duplicate
            if ran:
                entry.result = payload
    return ran


def _refuse(inbox: inboxguard.Inbox, consumer: str, command_id: str) -> int:
    """Apply ``{"n": 1}``, then refuse ``{"n": 2}``; return the quarantine record's ID."""
    assert _apply(inbox, consumer, command_id, {"n": 1})
    with pytest.raises(inboxguard.PayloadMismatchError):
        _apply(inbox, consumer, command_id, {"n": 2})
    [record] = [r for r in inbox.quarantined(consumer) if r.command_id == command_id]
    return record.id


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    try:
        out = json.loads(captured.out)
    except ValueError:
        out = captured.out
    return status, out, captured.err


def test_p1_release_lets_the_refused_command_run_again_and_records_who_and_why(
    inbox: inboxguard.Inbox, db_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    record_id = _refuse(inbox, "billing", "c-1")
    other_id = _refuse(inbox, "billing", "c-2")
    db = ["--db", db_url, "--prefix", prefix, "--json"]

    status, released, _ = _cli(
        capsys,
        "quarantine",
        "release",
        str(record_id),
        "--reason",
        "sender fixed",
        "--by",
        "ann",
        *db,
    )
    assert status == 0
    assert (released["action"], released["actor"], released["reason"]) == (
        "release",
        "ann",
        "sender fixed",
    )
    assert released["evidence_digest"] == inboxguard.digest_of({"n": 1})
    assert dt.datetime.fromisoformat(released["acted_at"]).utcoffset() == dt.timedelta(0)
    assert inbox.lookup("billing", "c-1") is None  # the evidence that refused it is gone
    # The corrected payload is now processed, once.
    assert _apply(inbox, "billing", "c-1", {"n": 2})
    assert not _apply(inbox, "billing", "c-1", {"n": 2})
    assert _cli(capsys, "quarantine", "release", str(record_id), "--reason", "x", *db)[0] == 1

    # resolve records who and why too, and leaves the evidence alone.
    status, resolved, _ = _cli(
        capsys, "quarantine", "resolve", str(other_id), "--reason", "dropped", "--by", "bob", *db
    )
    assert (status, resolved["action"], resolved["evidence_digest"]) == (0, "resolve", None)
    assert inbox.lookup("billing", "c-2") is not None
    with pytest.raises(inboxguard.PayloadMismatchError):
        _apply(inbox, "billing", "c-2", {"n": 2})

    status, shown, _ = _cli(capsys, "quarantine", "show", str(record_id), *db)
    assert status == 0
    assert [(a["action"], a["actor"], a["reason"]) for a in shown["actions"]] == [
        ("release", "ann", "sender fixed")
    ]
    # Durable: a new process (a new engine) reads the same trail.
    engine = create_engine(db_url)
    try:
        [action] = inboxguard.quarantine_show(engine, record_id, table_prefix=prefix).actions  # type: ignore[union-attr]
    finally:
        engine.dispose()
    assert action.actor == "ann"
    status, _, err = _cli(capsys, "quarantine", "release", str(other_id), "--reason", " ", *db)
    assert (status, "--reason must say why" in err) == (2, True)


def _seed_everything(engine: Engine, prefix: str, clock: FakeClock) -> inboxguard.Inbox:
    inbox = inboxguard.Inbox(
        engine, retention=dt.timedelta(days=7), table_prefix=prefix, clock=clock
    )
    inbox.create_schema()
    outbox = inboxguard.Outbox(engine, table_prefix=prefix, clock=clock)
    outbox.create_schema()
    inboxguard.EffectLedger(engine, table_prefix=prefix).create_schema()
    _apply(inbox, "billing", "c-1", {"n": 1})
    clock.advance(dt.timedelta(hours=1))
    _apply(inbox, "billing", "c-2", {"n": 1})
    _apply(inbox, "shipping", "s-1", {"n": 1})
    with pytest.raises(inboxguard.PayloadMismatchError):
        _apply(inbox, "billing", "c-1", {"n": 9})
    with Session(engine) as session, session.begin():
        outbox.add(session, command_id="c-1", destination="q", payload={"n": 1})
    clock.advance(dt.timedelta(hours=2))
    return inbox


def test_p2_stats_and_explain_show_evidence_quarantine_outbox_and_effects(
    engine: Engine, db_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = FakeClock(dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC))
    _seed_everything(engine, prefix, clock)
    try:
        found = inboxguard.stats(engine, table_prefix=prefix, clock=clock)
        billing, shipping = found.consumers  # type: ignore[misc]
        assert (billing.consumer, billing.processed, billing.quarantined) == ("billing", 2, 1)
        assert billing.oldest_processed_at == dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
        assert billing.oldest_evidence_age == dt.timedelta(hours=3)
        assert (shipping.processed, shipping.quarantined) == (1, 0)
        assert found.outbox is not None
        assert (found.outbox.backlog, found.outbox.oldest_unsent_age) == (1, dt.timedelta(hours=2))
        assert found.effects is not None
        assert set(found.effects.by_state.values()) == {0}

        db = ["--db", db_url, "--prefix", prefix]
        status, shown, _ = _cli(capsys, "stats", *db, "--json")
        assert status == 0
        assert [c["processed"] for c in shown["consumers"]] == [2, 1]
        assert shown["outbox"]["backlog"] == 1
        assert dt.datetime.fromisoformat(shown["at"]).utcoffset() == dt.timedelta(0)
        status, text, _ = _cli(capsys, "stats", *db)
        assert status == 0
        assert "billing" in text
        assert "2026-03-01T12:00:00+00:00" in text  # ISO 8601 for people too

        status, why, _ = _cli(capsys, "explain", "billing", "c-1", *db, "--json")
        assert (status, why["verdict"]) == (0, "duplicate")
        assert why["evidence"]["digest"] == inboxguard.digest_of({"n": 1})
        assert why["evidence"]["expires_at"].startswith("2026-03-08T12:00:00")
        [refused] = why["quarantine"]
        assert refused["record"]["incoming_digest"] == inboxguard.digest_of({"n": 9})
        assert why["outbox"]["destination"] == "q"
        status, fresh, _ = _cli(capsys, "explain", "billing", "never-seen", *db, "--json")
        assert (status, fresh["verdict"], fresh["evidence"]) == (0, "fresh", None)
        status, text, _ = _cli(capsys, "explain", "billing", "c-1", *db)
        assert "stored_digest" in text
        assert "payload_mismatch" in text
    finally:
        inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix).drop_schema()
        inboxguard.Outbox(engine, table_prefix=prefix).drop_schema()
        inboxguard.EffectLedger(engine, table_prefix=prefix).drop_schema()


def test_p2_explain_lists_the_effects_of_the_command(
    sqlite_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = create_engine(sqlite_url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    ledger = inboxguard.EffectLedger(engine, table_prefix=prefix)
    ledger.create_schema()
    gateway = SandboxGateway(engine, table_prefix=prefix)
    gateway.create_schema()
    gateway.script = ["timeout"]
    with pytest.raises(inboxguard.EffectOutcomeUnknownError):
        ledger.execute("inv-7/charge", gateway, {"amount": 1})
    ledger.execute("inv-70/charge", gateway, {"amount": 1})  # another command's effect
    status, why, _ = _cli(
        capsys, "explain", "billing", "inv-7", "--db", sqlite_url, "--prefix", prefix, "--json"
    )
    assert status == 0
    assert [(e["effect_key"], e["state"]) for e in why["effects"]] == [("inv-7/charge", "unknown")]
    found = inboxguard.stats(engine, table_prefix=prefix)
    assert found.effects is not None
    assert (found.effects.by_state["unknown"], found.effects.by_state["confirmed"]) == (1, 1)
    assert found.effects.oldest_unknown_at is not None
    engine.dispose()


def test_p3_missing_tables_and_unknown_ids_give_the_documented_exit_codes(
    sqlite_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = create_engine(sqlite_url)
    inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix).create_schema()
    db = ["--db", sqlite_url, "--prefix", prefix]
    assert _cli(capsys, "quarantine", "show", "42", *db)[0] == 1
    assert _cli(capsys, "quarantine", "resolve", "42", "--reason", "r", *db)[0] == 1
    status, _, err = _cli(capsys, "explain", "c", "x", "--db", sqlite_url, "--prefix", "nope_")
    assert (status, "the inbox tables are missing" in err) == (2, True)
    status, shown, _ = _cli(capsys, "stats", "--db", sqlite_url, "--prefix", "nope_", "--json")
    assert (status, shown["consumers"], shown["outbox"]) == (0, None, None)
    engine.dispose()


def test_p1_release_removes_the_evidence_standing_now_not_a_stale_digest(
    sqlite_url: str, prefix: str
) -> None:
    """A record reopened after the evidence changed still names the old digest
    as stored; its release removes what refuses its payload today."""
    engine = create_engine(sqlite_url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    assert _apply(inbox, "c", "x", {"v": "a"})
    for payload in ({"v": "c"}, {"v": "b"}):
        with pytest.raises(inboxguard.PayloadMismatchError):
            _apply(inbox, "c", "x", payload)
    on_c, on_b = inbox.quarantined()
    release: dict[str, Any] = {"actor": "ops", "reason": "r", "table_prefix": prefix}
    assert inboxguard.release_quarantine(engine, on_c.id, **release) is not None
    assert _apply(inbox, "c", "x", {"v": "c"})  # the evidence is now c's
    with pytest.raises(inboxguard.PayloadMismatchError):
        _apply(inbox, "c", "x", {"v": "b"})  # reopens on_b, still naming a's digest
    action = inboxguard.release_quarantine(engine, on_b.id, **release)
    assert action is not None
    assert action.evidence_digest == inboxguard.digest_of({"v": "c"})
    assert _apply(inbox, "c", "x", {"v": "b"})
    engine.dispose()


def test_p2_a_schema_per_tenant_is_read_where_the_engine_points(pg_url: str, prefix: str) -> None:
    """``schema_translate_map`` on the engine: the read model finds the tables
    in the tenant's schema, not in the default one."""
    tenant = unique("tenant")
    base = create_engine(pg_url)
    with base.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{tenant}"'))
    engine = base.execution_options(schema_translate_map={None: tenant})
    try:
        inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
        inbox.create_schema()
        record_id = _refuse(inbox, "billing", "c-1")
        [billing] = inboxguard.stats(engine, table_prefix=prefix).consumers or ()
        assert (billing.processed, billing.quarantined) == (1, 1)
        assert inboxguard.stats(base, table_prefix=prefix).consumers is None  # not in public
        action = inboxguard.release_quarantine(
            engine, record_id, actor="ops", reason="r", table_prefix=prefix
        )
        assert action is not None
        shown = inboxguard.quarantine_show(engine, record_id, table_prefix=prefix)
        assert shown is not None
        assert [a.action for a in shown.actions] == ["release"]
        why = inboxguard.explain(engine, consumer="billing", command_id="c-1", table_prefix=prefix)
        assert why.verdict == "fresh"
    finally:
        with base.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{tenant}" CASCADE'))
        base.dispose()
