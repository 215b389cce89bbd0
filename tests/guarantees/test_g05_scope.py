"""G5: evidence is scoped per consumer."""

from __future__ import annotations

from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import Inbox


def test_g05_same_id_under_two_consumers_runs_once_each(inbox: Inbox, engine: Engine) -> None:
    """Two consumers of one command each process it once."""
    seen = []
    for consumer in ["billing", "shipping", "billing", "shipping"]:
        with Session(engine) as session, session.begin():
            with inbox.guard(session, consumer=consumer, command_id="o-1", payload={}) as e:
                if not e.duplicate:
                    seen.append(consumer)
    assert seen == ["billing", "shipping"]


def test_g05_ids_differing_only_in_case_are_distinct(inbox: Inbox, engine: Engine) -> None:
    """Identity comparison is exact on every database (no case folding)."""
    fresh = []
    for cid in ["Order-1", "order-1", "ORDER-1"]:
        with Session(engine) as session, session.begin():
            with inbox.guard(session, consumer="c", command_id=cid, payload={}) as e:
                fresh.append(not e.duplicate)
    assert fresh == [True, True, True]
