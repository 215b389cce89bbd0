"""RD14: ``inboxguard stats``, ``explain`` and the quarantine commands work on
a RedisInbox named with ``--redis``/``--key-prefix`` (or
``$INBOXGUARD_REDIS_URL``), in the SQL branch's shapes, with who and why
recorded; the read model takes the inbox in place of an engine."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

import inboxguard
from inboxguard.cli import main
from inboxguard.inbox import QuarantineAction
from inboxguard.operations import CommandExplanation, ConsumerStats, Stats
from tests.conftest import REDIS_URL
from tests.redis.conftest import DAY


def _deliver(box: inboxguard.RedisInbox, client: Any, cid: str, payload: object) -> None:
    with client.pipeline() as pipe:
        with box.guard(pipe, consumer="billing", command_id=cid, payload=payload) as entry:
            if not entry.duplicate:
                pipe.rpush(f"{box.key_prefix}applied", cid)


def _names(kind: type) -> set[str]:
    return {f.name for f in dataclasses.fields(kind)}


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_rd14_stats_explain_and_the_quarantine_from_the_shell(
    redis_client: Any, key_prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    box = inboxguard.RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix)
    for cid in ("a", "b", "c"):
        _deliver(box, redis_client, cid, {"v": 1})
    for cid in ("a", "b"):
        with pytest.raises(inboxguard.PayloadMismatchError):
            _deliver(box, redis_client, cid, {"v": 2})
    where = ["--redis", REDIS_URL, "--key-prefix", key_prefix]

    found = _json(capsys, "stats", *where)
    assert set(found) == _names(Stats)
    (billing,) = found["consumers"]
    assert set(billing) == _names(ConsumerStats)
    assert (billing["processed"], billing["quarantined"]) == (3, 2)
    assert found["durability"]["maxmemory_policy"] == "noeviction"
    assert found["outbox"] is None
    assert found["effects"] is None

    told = _json(capsys, "explain", "billing", "a", *where)
    # The explanation's fields, and the command that lists the records not shown.
    assert set(told) == _names(CommandExplanation) | {"quarantine_rest"}
    assert told["verdict"] == "duplicate"
    assert (told["quarantine_total"], told["quarantine_rest"]) == (1, None)
    (detail,) = told["quarantine"]
    assert detail["record"]["reason"] == "payload_mismatch"

    listed = _json(capsys, "quarantine", "list", *where)
    ids = {r["command_id"]: r["id"] for r in listed}
    assert sorted(ids) == ["a", "b"]

    released = _json(
        capsys,
        "quarantine",
        "release",
        str(ids["a"]),
        "--reason",
        "v2 is right",
        "--by",
        "ops",
        *where,
    )
    assert set(released) == _names(QuarantineAction)
    assert (released["action"], released["actor"], released["reason"]) == (
        "release",
        "ops",
        "v2 is right",
    )
    assert released["evidence_digest"] == detail["record"]["stored_digest"]
    resolved = _json(
        capsys,
        "quarantine",
        "resolve",
        str(ids["b"]),
        "--reason",
        "sender fixed",
        "--by",
        "ann",
        *where,
    )
    assert (resolved["action"], resolved["evidence_digest"]) == ("resolve", None)

    _deliver(box, redis_client, "a", {"v": 2})  # released: processed now
    with pytest.raises(inboxguard.PayloadMismatchError):
        _deliver(box, redis_client, "b", {"v": 2})  # resolved: evidence untouched
    applied = redis_client.lrange(f"{key_prefix}applied", 0, -1)
    assert applied == [b"a", b"b", b"c", b"a"]

    shown = _json(capsys, "quarantine", "show", str(ids["a"]), *where)
    assert shown["status"] == "resolved"
    assert [(a["action"], a["actor"]) for a in shown["actions"]] == [("release", "ops")]
    assert main(["quarantine", "release", str(ids["a"]), "--reason", "again", *where]) == 1
    assert "no open record" in capsys.readouterr().err
    assert main(["quarantine", "list", *where]) == 0
    text = capsys.readouterr().out
    assert "billing" in text
    assert "payload_mismatch" in text

    # the read model from Python: the inbox in place of the engine, the same values
    stats = inboxguard.stats(box)
    assert [(c.consumer, c.processed) for c in stats.consumers or ()] == [("billing", 3)]
    (action,) = inboxguard.quarantine_show(box, ids["a"]).actions  # type: ignore[union-attr]
    assert isinstance(action, QuarantineAction)
    assert action.actor == "ops"


TRANSPORT = """
sent = []

def make():
    def send(message):
        sent.append((message.command_id, message.destination, message.payload))
        return {"id": len(sent)}
    return send
"""


def test_rd14_replay_publishes_the_stored_message_and_records_it(
    redis_client: Any,
    key_prefix: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    box = inboxguard.RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix)
    details = {"body": {"n": 1}, "routing_key": "credits"}
    assert box.quarantine_delivery(
        consumer="c", command_id="m1", payload={}, reason="retries_exhausted", details=details
    )
    (record,) = box.quarantined("c")
    name = f"rd14_transport_{key_prefix.strip(':').replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(TRANSPORT)
    monkeypatch.chdir(tmp_path)
    where = ["--redis", REDIS_URL, "--key-prefix", key_prefix]
    args = ["quarantine", "replay", str(record.id), "--transport", f"{name}:make"]
    assert main([*args, "--reason", "fixed", "--by", "ops", *where]) == 0
    capsys.readouterr()
    import importlib

    assert importlib.import_module(name).sent == [("m1", "credits", {"n": 1})]
    (replay,) = box.quarantine_replays(record.id)
    assert (replay.replayed_by, replay.reason, replay.receipt) == ("ops", "fixed", {"id": 1})
    assert box.quarantined("c") == []


def test_rd14_naming_the_inbox_refuses_ambiguity_and_never_prints_a_password(
    redis_client: Any,
    key_prefix: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("INBOXGUARD_DB_URL", raising=False)
    monkeypatch.setenv("INBOXGUARD_REDIS_URL", REDIS_URL)
    box = inboxguard.RedisInbox(redis_client, retention=DAY, key_prefix=key_prefix)
    _deliver(box, redis_client, "x", {})
    found = _json(capsys, "stats", "--key-prefix", key_prefix)  # from the environment
    assert [c["processed"] for c in found["consumers"]] == [1]

    assert main(["stats", "--db", "sqlite://", "--redis", REDIS_URL]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["stats", "--db", "sqlite://", "--key-prefix", "p:"]) == 2
    assert "--key-prefix" in capsys.readouterr().err
    assert main(["stats", "--prefix", "t_"]) == 2  # a table prefix for a Redis inbox
    assert "--key-prefix" in capsys.readouterr().err
    monkeypatch.setenv("INBOXGUARD_DB_URL", "sqlite://")
    assert main(["stats"]) == 2
    assert "pass --db or --redis" in capsys.readouterr().err

    secret = "s3cr3t-pw"
    closed = f"redis://:{secret}@127.0.0.1:1/0"
    assert main(["quarantine", "list", "--redis", closed]) == 3
    err = capsys.readouterr().err
    assert "cannot use the Redis server redis://:***@127.0.0.1:1/0" in err
    assert secret not in err
