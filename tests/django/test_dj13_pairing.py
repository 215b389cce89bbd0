"""DJ13: a Django store paired with a SQLAlchemy session factory is refused
where it is declared (Celery task, Dramatiq middleware, kombu callback), not
discovered by quarantining every delivery as ``configuration``."""

from __future__ import annotations

from typing import Any

import pytest
from celery import Celery
from sqlalchemy.orm import sessionmaker

from inboxguard import ConfigurationError
from inboxguard.adapters.celery import InboxTask
from tests.conftest import unique


@pytest.mark.parametrize("alias", ["sqlite"], indirect=True)
def test_dj13_a_django_store_with_a_sessionmaker_is_refused_at_declaration(
    dj_inbox: Any,
) -> None:
    app = Celery(unique("app"), broker="memory://", set_as_current=False)
    with pytest.raises(ConfigurationError, match=r"session_factory=inbox\.session"):

        @app.task(
            base=InboxTask,
            inbox=dj_inbox,
            inbox_session_factory=sessionmaker(dj_inbox.engine),
            inbox_command_id="ref",
            name=unique("t"),
            shared=False,
        )
        def apply_ref(ref: str) -> None:
            return None

        app.finalize()


@pytest.mark.parametrize("alias", ["sqlite"], indirect=True)
def test_dj13_the_same_pairing_is_refused_by_dramatiq_and_kombu(dj_inbox: Any) -> None:
    from dramatiq.brokers.stub import StubBroker

    from inboxguard.adapters.dramatiq import InboxMiddleware
    from inboxguard.adapters.kombu import guarded

    factory = sessionmaker(dj_inbox.engine)
    with pytest.raises(ConfigurationError, match="Django store"):
        StubBroker().add_middleware(InboxMiddleware(dj_inbox, session_factory=factory))
    with pytest.raises(ConfigurationError, match="Django store"):
        guarded(lambda body, message: None, dj_inbox, session_factory=factory, consumer="c")


@pytest.mark.parametrize("alias", ["sqlite"], indirect=True)
def test_dj13_the_django_session_is_accepted(dj_inbox: Any) -> None:
    app = Celery(unique("app"), broker="memory://", set_as_current=False)

    @app.task(
        base=InboxTask,
        inbox=dj_inbox,
        inbox_session_factory=dj_inbox.session,
        inbox_command_id="ref",
        name=unique("t"),
        shared=False,
    )
    def apply_ref(ref: str) -> None:
        return None

    app.finalize()
