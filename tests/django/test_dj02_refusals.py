"""DJ2: the Django store refuses, naming the fix and writing nothing, a guard
or an outbox add outside transaction.atomic() (Django's autocommit), inside a
block already marked for rollback, with a session of another kind, from
asyncio, and settings it cannot keep its promises with."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from inboxguard import ConfigurationError


def _guard(box: Any, command_id: str = "r-1", session: Any = None) -> Any:
    return box.guard(session, consumer="c", command_id=command_id, payload={"n": 1})


def test_dj2_outside_atomic_is_refused(dj_inbox: Any, ledger: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"inside transaction\.atomic"):
        with _guard(dj_inbox):
            ledger.mutate("r-1")
    assert dj_inbox.lookup("c", "r-1") is None
    assert ledger.applied() == []


def test_dj2_a_block_marked_for_rollback_is_refused(dj_inbox: Any, alias: str) -> None:
    with transaction.atomic(using=alias):
        transaction.set_rollback(True, using=alias)
        with pytest.raises(ConfigurationError, match="marked for rollback"):
            with _guard(dj_inbox):
                pass
    assert dj_inbox.lookup("c", "r-1") is None


def test_dj2_a_session_of_another_kind_or_alias_is_refused(dj_inbox: Any, alias: str) -> None:
    from inboxguard.django import DjangoSession

    engine = create_engine("sqlite://")
    with transaction.atomic(using=alias):
        with pytest.raises(ConfigurationError, match="without a session"):
            with _guard(dj_inbox, session=Session(engine)):
                pass
        with pytest.raises(ConfigurationError, match="use the store built for that alias"):
            with _guard(dj_inbox, session=DjangoSession("elsewhere")):
                pass
        with _guard(dj_inbox, session=dj_inbox.session()) as entry:
            assert not entry.duplicate
    with pytest.raises(ConfigurationError, match="synchronous"):
        dj_inbox.guard_async(consumer="c", command_id="r-1", payload={})


def test_dj2_settings_are_checked() -> None:
    from inboxguard.django import DjangoInbox

    with override_settings(INBOXGUARD={"RETENTON": dt.timedelta(days=1)}):
        with pytest.raises(ConfigurationError, match="unknown key"):
            DjangoInbox()
    with override_settings(INBOXGUARD={}):
        with pytest.raises(ConfigurationError, match=r"\['RETENTION'\] is missing"):
            DjangoInbox()
    with override_settings(INBOXGUARD={"RETENTION": dt.timedelta(days=1), "DATABASE": "nope"}):
        with pytest.raises(ConfigurationError, match="not a database alias"):
            DjangoInbox()


def test_dj2_missing_tables_are_a_configuration_error(alias: str) -> None:
    from inboxguard.django import DjangoInbox

    box = DjangoInbox(database=alias, table_prefix="nowhere_", retention=dt.timedelta(days=1))
    with pytest.raises(ConfigurationError, match="create_schema"):
        with transaction.atomic(using=alias), _guard(box):
            pass
    box.engine.dispose()


def test_dj2_an_async_session_factory_is_refused_by_the_adapters(dj_inbox: Any) -> None:
    """The Django store has no AsyncSession path (capabilities.async_sessions is
    False): the Dramatiq and FastStream adapters refuse an async_session_factory
    for it when they are built, not at the first delivery."""
    from inboxguard.adapters.dramatiq import InboxMiddleware as DramatiqMiddleware
    from inboxguard.adapters.faststream import InboxMiddleware as FastStreamMiddleware

    assert not dj_inbox.capabilities.async_sessions
    with pytest.raises(ConfigurationError, match="django store"):
        DramatiqMiddleware(
            dj_inbox, session_factory=dj_inbox.session, async_session_factory=lambda: None
        )
    with pytest.raises(ConfigurationError, match="django store"):
        FastStreamMiddleware(
            dj_inbox, consumer="c", command_id="id", async_session_factory=lambda: None
        )
