"""DJ6: DjangoOutbox.add writes its row in the caller's atomic() block (it
commits or rolls back with the business change), is refused outside one, and
the existing Dispatcher delivers the row from the same table."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction

from inboxguard import ConfigurationError, Dispatcher, OutboxPayloadConflictError
from tests.conftest import unique


class BoomError(Exception):
    pass


@pytest.fixture
def dj_outbox(alias: str) -> Iterator[Any]:
    from inboxguard.django import DjangoOutbox

    box = DjangoOutbox(database=alias, table_prefix=unique("o") + "_")
    box.create_schema()
    yield box
    box.drop_schema()
    box.engine.dispose()


def _add(box: Any, command_id: str, payload: Any) -> bool:
    return bool(box.add(command_id=command_id, destination="emails", payload=payload))


def test_dj6_the_row_commits_or_rolls_back_with_the_block(dj_outbox: Any, alias: str) -> None:
    with transaction.atomic(using=alias):
        assert _add(dj_outbox, "o-1", {"to": "a@example.com"})
    with pytest.raises(BoomError), transaction.atomic(using=alias):
        assert _add(dj_outbox, "o-2", {"to": "b@example.com"})
        raise BoomError
    assert dj_outbox.get("o-1") is not None
    assert dj_outbox.get("o-2") is None
    with transaction.atomic(using=alias):
        assert not _add(dj_outbox, "o-1", {"to": "a@example.com"})  # same intent: no-op
    with pytest.raises(OutboxPayloadConflictError), transaction.atomic(using=alias):
        _add(dj_outbox, "o-1", {"to": "someone else"})


def test_dj6_outside_atomic_is_refused(dj_outbox: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"outbox\.add\(\) must run inside"):
        _add(dj_outbox, "o-3", {})
    assert dj_outbox.get("o-3") is None


def test_dj6_the_dispatcher_delivers_the_row(dj_outbox: Any, alias: str) -> None:
    sent: list[Any] = []
    with transaction.atomic(using=alias):
        _add(dj_outbox, "o-4", {"to": "c@example.com"})
    dispatcher = Dispatcher(dj_outbox, lambda message: sent.append(message) or "ok")
    assert dispatcher.run_once() == 1
    assert [m.command_id for m in sent] == ["o-4"]
    assert dj_outbox.get("o-4").delivered_at is not None
