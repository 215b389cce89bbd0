"""``inboxguard quarantine list|show|resolve|replay`` on each supported database."""

from __future__ import annotations

import getpass
import json
from typing import Any

import pytest
from kombu import Connection, Queue
from sqlalchemy.orm import Session

import inboxguard
from inboxguard.adapters.kombu import ATTEMPT_HEADER, RETRY_AT_HEADER
from inboxguard.cli import main
from tests.conftest import AMQP_URL, require_service, unique


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
        status = main(["quarantine", *argv, *db, "--json"])
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

    status, resolved = run("resolve", str(first), "--reason", "sender fixed", "--by", "ops")
    assert status == 0
    assert isinstance(resolved, dict)
    assert (resolved["action"], resolved["actor"], resolved["reason"]) == (
        "resolve",
        "ops",
        "sender fixed",
    )
    assert resolved["evidence_digest"] is None  # resolving removes no evidence
    assert run("resolve", str(first), "--reason", "again") == (1, None)  # no longer open
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
    assert "the inbox tables are missing" in capsys.readouterr().err
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


# -- replay --------------------------------------------------------------------------------


def kombu_transport() -> Any:
    """The ``--transport`` factory of the replay tests: kombu on RabbitMQ."""
    from inboxguard.adapters.kombu.transport import KombuTransport

    return KombuTransport(Connection(AMQP_URL))


def _exhausted(inbox: inboxguard.Inbox, command_id: str, routing_key: str) -> int:
    """Quarantine a kombu delivery that used up its attempts; return the record's ID."""
    body = {"command_id": command_id, "amount": 7}
    headers = {ATTEMPT_HEADER: 3, RETRY_AT_HEADER: 1.0, "trace": "t-1"}
    inbox.quarantine_delivery(
        consumer="billing",
        command_id=command_id,
        payload=body,
        reason=inboxguard.QuarantineReason.RETRIES_EXHAUSTED,
        details={"body": body, "headers": headers, "routing_key": routing_key},
    )
    [record] = [r for r in inbox.quarantined("billing") if r.command_id == command_id]
    return record.id


def test_l19_replay_publishes_the_stored_message_and_records_who_and_why(
    inbox: inboxguard.Inbox, db_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    require_service("rabbitmq")
    queue = Queue(unique("replayed"), durable=False, auto_delete=False)
    missing = unique("no-such-queue")
    record_id = _exhausted(inbox, "c-7", missing)
    transport = ["--transport", "tests.cli.test_quarantine:kombu_transport"]
    replay = ["quarantine", "replay", str(record_id), *transport, "--db", db_url]
    replay += ["--prefix", prefix]
    with Connection(AMQP_URL) as conn:
        queue(conn.default_channel).declare()
        try:
            # Where it came from no longer exists: not published, nothing recorded.
            assert main([*replay, "--reason", "retry after the fix"]) == 1
            assert "nothing was recorded" in capsys.readouterr().err
            assert inbox.quarantine_replays(record_id) == []
            assert inbox.quarantine_record(record_id).status == "open"  # type: ignore[union-attr]

            destination = ["--destination", queue.name, "--json"]
            status = main([*replay, "--reason", "retry after the fix", *destination])
            assert status == 0
            printed = json.loads(capsys.readouterr().out)
            assert printed["replay"]["replayed_by"] == getpass.getuser()
            message = queue(conn.default_channel).get(no_ack=True)
        finally:
            queue(conn.default_channel).delete()
    assert message is not None
    assert json.loads(message.body) == {"command_id": "c-7", "amount": 7}
    assert message.properties["message_id"] == "c-7"
    assert message.headers == {"trace": "t-1", "x-inbox-command-id": "c-7"}
    [done] = inbox.quarantine_replays(record_id)
    assert (done.destination, done.reason) == (queue.name, "retry after the fix")
    assert inbox.quarantine_record(record_id).status == "resolved"  # type: ignore[union-attr]
    # show lists the replays with the record.
    show = ["quarantine", "show", str(record_id), "--db", db_url, "--prefix", prefix, "--json"]
    assert main(show) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [r["replayed_by"] for r in shown["replays"]] == [getpass.getuser()]


def test_l19_replay_refuses_what_it_cannot_replay(
    inbox: inboxguard.Inbox, db_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _refuse(inbox, "billing", "c-1")  # its details keep headers only, no message
    [record] = inbox.quarantined("billing")
    no_route = _exhausted(inbox, "c-2", "")
    base = ["--transport", "tests.cli.test_quarantine:kombu_transport", "--db", db_url]
    base += ["--prefix", prefix]

    def replay(record_id: int, *extra: str) -> tuple[int, str]:
        status = main(["quarantine", "replay", str(record_id), *base, *extra])
        return status, capsys.readouterr().err

    assert replay(999, "--reason", "r") == (1, "inboxguard quarantine: no record with ID 999\n")
    status, err = replay(record.id, "--reason", "r")
    assert (status, "keeps no message to replay" in err) == (2, True)
    status, err = replay(no_route, "--reason", "r")
    assert (status, "pass --destination" in err) == (2, True)
    status, err = replay(no_route, "--reason", "  ")
    assert (status, "--reason must say why" in err) == (2, True)
    with pytest.raises(SystemExit) as exit_info:
        main(["quarantine", "replay", str(no_route), *base])
    assert exit_info.value.code == 2
    assert "--reason" in capsys.readouterr().err
    assert inbox.quarantine_replays(no_route) == []


#: What :func:`recording_transport` was handed, in order.
PUBLISHED: list[inboxguard.OutboxMessage] = []


def recording_transport() -> Any:
    """A ``--transport`` factory that keeps what it is handed."""

    def send(message: inboxguard.OutboxMessage) -> dict[str, int]:
        PUBLISHED.append(message)
        return {"n": len(PUBLISHED)}

    return send


def test_p12_a_resolved_record_is_replayed_only_with_again_and_it_is_recorded(
    inbox: inboxguard.Inbox, db_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    PUBLISHED.clear()
    record_id = _exhausted(inbox, "c-8", "billing")
    replay = ["quarantine", "replay", str(record_id), "--db", db_url, "--prefix", prefix]
    replay += ["--transport", "tests.cli.test_quarantine:recording_transport"]
    assert main([*replay, "--reason", "after the fix", "--by", "ana"]) == 0
    capsys.readouterr()
    # Resolved now: a second replay is refused, in one line, and publishes nothing.
    assert main([*replay, "--reason", "once more", "--by", "bob"]) == 1
    err = capsys.readouterr().err
    assert "--again" in err
    assert err.count("\n") == 1
    assert len(PUBLISHED) == 1
    assert main([*replay, "--reason", "once more", "--by", "bob", "--again"]) == 0
    assert len(PUBLISHED) == 2
    first, again = inbox.quarantine_replays(record_id)
    assert (first.replayed_by, again.replayed_by) == ("ana", "bob")
    assert again.reason.startswith("once more (again")


def test_p13_list_pages_through_every_record_with_a_total(
    inbox: inboxguard.Inbox, db_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [_exhausted(inbox, f"c-{n}", "billing") for n in range(5)]
    listing = ["quarantine", "list", "--db", db_url, "--prefix", prefix, "--limit", "2"]
    seen: list[int] = []
    after: list[str] = []
    for _ in range(3):
        assert main([*listing, *after]) == 0
        out = capsys.readouterr().out
        rows = [line.split()[0] for line in out.splitlines()[1:-1] if line[:1].isdigit()]
        seen += [int(r) for r in rows]
        summary = out.splitlines()[-1]
        assert f"{len(rows)} shown of 5 open records" in summary
        if "--after" in summary:
            after = ["--after", summary.rsplit(" ", 1)[-1]]
    assert seen == ids
    assert inboxguard.quarantine_count(inbox.engine, table_prefix=prefix) == 5
    page = inboxguard.quarantine_list(inbox.engine, table_prefix=prefix, after=ids[3])
    assert [r.id for r in page] == [ids[4]]


def test_p17_an_operators_reason_the_database_cannot_store_is_kept_escaped(
    inbox: inboxguard.Inbox,
) -> None:
    record_id = _exhausted(inbox, "c-9", "billing")
    done = inbox.resolve_quarantine(record_id, actor="ana\x00", reason="fixed \x00 \ud800 it")
    assert done is True
    [action] = inbox.quarantine_actions(record_id)
    assert (action.actor, action.reason) == ("ana\\x00", "fixed \\x00 \\ud800 it")
