"""The dashboard over a partitioned PostgreSQL inbox
(``Inbox(..., partitioning="daily")``): the overview counts the evidence of
every partition and lists the open quarantine, a search explains a command
whatever partition holds it, and a release from the record page removes the
evidence from its partition (S8)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine
from starlette.testclient import TestClient

import inboxguard
from tests.inbox.partitioning.conftest import fill_for_operators, where_rows

TOKEN = "s3cret-operator-token"


@pytest.fixture
def pbox(pg_url: str, prefix: str) -> Iterator[inboxguard.Inbox]:
    engine = create_engine(pg_url)
    box = inboxguard.Inbox(
        engine, retention=dt.timedelta(days=2), table_prefix=prefix, partitioning="daily"
    )
    box.create_schema()
    yield box
    box.drop_schema()
    engine.dispose()


def _client(engine: Engine, prefix: str) -> TestClient:
    app = inboxguard.dashboard_app(
        engine,
        token=TOKEN,
        table_prefix=prefix,
        sample_every=dt.timedelta(seconds=30),
        allowed_hosts=["dash.local"],
    )
    return TestClient(app, base_url="http://dash.local", follow_redirects=False)


def _consumer_row(page: str, consumer: str) -> tuple[int, int]:
    """(evidence rows, open quarantine) of ``consumer`` on the overview."""
    found = re.search(rf'<td>{consumer}</td><td class="n">(\d+)</td><td class="n">(\d+)</td>', page)
    assert found is not None, page
    return int(found.group(1)), int(found.group(2))


def test_s8_the_dashboard_reads_and_settles_a_partitioned_inbox(
    pbox: inboxguard.Inbox,
) -> None:
    record_id = fill_for_operators(pbox)
    pbox.create_partitions(ahead=5)
    engine, prefix = pbox.engine, pbox.table_prefix
    with _client(engine, prefix) as client:
        front = client.get("/")
        assert front.status_code == 200
        assert _consumer_row(front.text, "billing") == (3, 1)
        queue = re.search(r'<table id="quarantine">(.*?)</table>', front.text, re.S)
        assert queue is not None
        assert f'<a href="/quarantine/{record_id}">{record_id}</a>' in queue.group(1)
        assert "<td>c-2</td>" in queue.group(1)

        found = client.get("/search", params={"q": "c-2"})
        assert found.status_code == 200
        assert found.text.count('<article class="command"') == 1
        assert "at consumer billing" in found.text
        assert '<p class="state" data-column="inbox">accepted</p>' in found.text
        assert "Quarantine: 1 open of 1." in found.text
        assert "Nothing is stored" in client.get("/search", params={"q": "c-9"}).text

        record = client.get(f"/quarantine/{record_id}")
        assert record.status_code == 200
        assert '<dd id="status">open</dd>' in record.text

        form = {"who": "ana", "why": "upstream fixed", "confirm": "yes", "token": TOKEN}
        done = client.post(
            f"/quarantine/{record_id}/release", data=form, headers={"origin": "http://dash.local"}
        )
        assert done.status_code == 303
        assert _consumer_row(client.get("/").text, "billing") == (2, 0)
    assert sorted(where_rows(engine, pbox)) == ["c-1", "c-3"]
    with engine.begin() as conn:
        with pbox.guard(conn, consumer="billing", command_id="c-2", payload={"n": 99}) as entry:
            assert not entry.duplicate
