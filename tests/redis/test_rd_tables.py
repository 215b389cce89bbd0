"""RD12: a handler guarded by a RedisInbox has a guarantee table whose
transaction boundary is Redis MULTI/EXEC and states the durability read from
the server; a locked check fails when the server's fsync policy changes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import inboxguard
from inboxguard.adapters.kombu import guarded
from inboxguard.cli import main
from tests.conftest import REDIS_URL, unique
from tests.redis.conftest import DAY

APP = """
import datetime as dt
import redis
import inboxguard

inbox = inboxguard.RedisInbox(
    redis.Redis.from_url({url!r}), retention=dt.timedelta(days=1), key_prefix={prefix!r}
)

@inbox.handler(consumer="credits.grant", command_id="ref", guarantee=inboxguard.Guarantee(
    no_external_effect=True))
def grant(pipe, ref, amount):
    pipe.incrby("credits", amount)
"""


@pytest.fixture
def restore_fsync(redis_client: Any) -> Iterator[str]:
    """The server's appendfsync before the test, set back afterwards (asserted)."""
    before = redis_client.config_get("appendfsync")["appendfsync"]
    yield before
    redis_client.config_set("appendfsync", before)
    assert redis_client.config_get("appendfsync")["appendfsync"] == before


def test_rd12_handler_and_adapter_tables_name_multi_exec_and_the_servers_durability(
    redis_client: Any, key_prefix: str
) -> None:
    box = inboxguard.RedisInbox(redis_client, retention=2 * DAY, key_prefix=key_prefix)

    @box.handler(consumer="credits.grant", command_id="ref")
    def grant(pipe: Any, ref: str) -> None:
        pipe.incr(f"{key_prefix}credits")

    guarded(
        lambda body, message: None,
        box,
        session_factory=lambda: redis_client,
        command_id="ref",
        consumer="credits.kombu",
    )
    tables = {g.consumer: g for g in inboxguard.guarantees_of(box)}
    assert set(tables) == {"credits.grant", "credits.kombu"}
    server = box.durability()
    for table in tables.values():
        boundary = table.transaction_boundary
        layer = table.layer
        assert boundary is not None
        assert boundary.value is not None
        assert layer is not None
        assert layer.value is not None
        assert "Redis MULTI/EXEC" in boundary.value
        assert "Redis MULTI/EXEC" in layer.value
        assert layer.settings["local"] == "redis"
        assert server.summary in boundary.value
        assert boundary.settings["server.appendfsync"] == server.appendfsync
        assert boundary.settings["server.appendonly"] == server.appendonly
        assert boundary.settings["server.maxmemory_policy"] == "noeviction"
        assert boundary.settings["server.role"] == server.role
        assert boundary.settings["key_prefix"] == key_prefix
        assert table.dedup_window is not None
        assert table.dedup_window.settings["horizon"] == "2d"


def test_rd12_a_changed_appendfsync_fails_the_locked_check(
    redis_client: Any,
    key_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    restore_fsync: str,
) -> None:
    name = unique("redis_tables_app_")
    (tmp_path / f"{name}.py").write_text(APP.format(url=REDIS_URL, prefix=key_prefix))
    monkeypatch.chdir(tmp_path)
    lock = tmp_path / "guarantees.lock"
    args = ["guarantees", "--app", f"{name}:inbox"]
    assert main([*args, "--json"]) == 0
    (table,) = json.loads(capsys.readouterr().out)
    assert "Redis MULTI/EXEC" in table["transaction_boundary"]["value"]
    assert table["transaction_boundary"]["settings"]["server.appendfsync"] == restore_fsync
    assert main([*args, "--lock", str(lock)]) == 0
    assert main([*args, "--check", "--lock", str(lock)]) == 0
    capsys.readouterr()
    other = "no" if restore_fsync != "no" else "everysec"
    redis_client.config_set("appendfsync", other)
    assert main([*args, "--check", "--lock", str(lock)]) == 1
    out = capsys.readouterr().out
    assert "server.appendfsync" in out
    assert f'"{restore_fsync}" (lock) -> "{other}" (now)' in out
