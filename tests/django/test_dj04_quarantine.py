"""DJ4: a refused delivery's quarantine record is written on a connection of
its own, so it survives the rollback of the caller's atomic() block; on
SQLite outside WAL mode, where that write could only wait and fail, the
record is logged at ERROR at once instead."""

from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Any

import pytest
from django.db import transaction

from inboxguard import PayloadMismatchError
from tests.django.ledger import quarantined


def _deliver(box: Any, alias: str, payload: Any) -> None:
    with transaction.atomic(using=alias):
        with box.guard(consumer="c", command_id="q-1", payload=payload):
            pass


def test_dj4_the_record_survives_the_rollback(dj_inbox: Any, ledger: Any) -> None:
    _deliver(dj_inbox, ledger.alias, {"n": 1})
    with pytest.raises(PayloadMismatchError), transaction.atomic(using=ledger.alias):
        if ledger.alias != "default":  # SQLite: one writer at a time (see DJ4)
            ledger.mutate("before the guard, rolled back")
        _deliver(dj_inbox, ledger.alias, {"n": 2})
    assert ledger.applied() == []
    records = quarantined(dj_inbox, "c", "q-1")
    assert [(r.reason, r.status) for r in records] == [("payload_mismatch", "open")]


def test_dj4_sqlite_without_wal_logs_at_once(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from inboxguard.django import DjangoInbox
    from tests.django.support import add_sqlite_alias

    alias = add_sqlite_alias("journal", str(tmp_path / "journal.db"))
    box = DjangoInbox(database=alias, table_prefix="j_", retention=dt.timedelta(days=1))
    box.create_schema()
    _deliver(box, alias, {"n": 1})
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, "inboxguard"), pytest.raises(PayloadMismatchError):
        _deliver(box, alias, {"n": 2})
    assert time.monotonic() - started < 2  # no wait on the busy timeout
    assert "journal mode" in caplog.text
    assert "'incoming_digest'" in caplog.text  # the whole record is in the log
    assert quarantined(box, "c", "q-1") == []
    box.engine.dispose()
