"""V1-V4 on Celery: each field comes from the app's real configuration, a
changed setting changes the table, ``lock_changes`` names field and both
values, and each contradiction names its setting."""

from __future__ import annotations

import contextlib
import datetime as dt
from typing import Any

import pytest
from celery import Celery
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.celery import InboxTask
from inboxguard.guarantees import Contradiction
from tests.conftest import REDIS_URL


def make_app(inbox: inboxguard.Inbox, **task_options: Any) -> Celery:
    app = Celery("tables", broker=REDIS_URL, set_as_current=False)
    options: dict[str, Any] = {
        "base": InboxTask,
        "inbox": inbox,
        "inbox_session_factory": sessionmaker(inbox.engine),
        "inbox_command_id": "invoice_id",
        "name": "billing.charge",
        "inbox_consumer": "billing.charge-invoice",
        "max_retries": 3,
        **task_options,
    }

    @app.task(shared=False, **options)
    def charge(invoice_id: str) -> None:
        return None

    return app


def table_of(app: Celery) -> inboxguard.Guarantee:
    """This test's task: shared tasks other tests declared join every app
    finalized after them (Celery's own rule), so the app may list more."""
    (table,) = [t for t in inboxguard.guarantees_of(app) if t.handler == "billing.charge"]
    return table


def problems_of(app: Celery, handler: str = "billing.charge") -> list[Contradiction]:
    return [c for c in inboxguard.contradictions_of(app) if c.handler == handler]


def changes_of(app: Celery, reviewed: list[dict[str, Any]]) -> list[Contradiction]:
    return inboxguard.lock_changes([table_of(app)], reviewed)


def test_fields_are_read_from_the_app(table_inbox: inboxguard.Inbox) -> None:
    app = make_app(table_inbox)
    table = table_of(app)
    assert table.handler == "billing.charge"
    assert table.consumer == "billing.charge-invoice"
    delivery = table.fact("delivery_mode")
    assert delivery is not None
    assert delivery.settings["acks_late"] is True
    assert delivery.settings["reject_on_worker_lost"] is True
    dedup = table.fact("dedup_window")
    assert dedup is not None
    assert dedup.settings["horizon"] == "7d"
    assert dedup.settings["visibility_timeout"] == "1h"  # kombu's Redis default
    identity = table.fact("identity")
    assert identity is not None
    assert identity.settings["inbox_command_id"] == "argument 'invoice_id'"
    # nothing declared: what the provider does is unknown, not guessed
    provider = table.fact("provider_behaviour")
    assert provider is not None
    assert provider.value is None
    assert provider.source == "unknown"
    assert problems_of(app) == []


def test_a_changed_setting_is_named_with_both_values(table_inbox: inboxguard.Inbox) -> None:
    app = make_app(table_inbox)
    reviewed = inboxguard.read_lock(inboxguard.lock_text([table_of(app)]))
    assert changes_of(app, reviewed) == []
    app.conf.broker_transport_options = {"visibility_timeout": 7200}
    changes = changes_of(app, reviewed)
    assert [(c.field, c.setting) for c in changes] == [("dedup_window", "visibility_timeout")]
    assert '"1h" (lock) -> "2h" (now)' in changes[0].message


def test_retention_policy_changes_are_caught(
    table_inbox: inboxguard.Inbox, sqlite_url: str
) -> None:
    app = make_app(table_inbox)
    reviewed = inboxguard.read_lock(inboxguard.lock_text([table_of(app)]))
    table_inbox.retention = inboxguard.RetentionPolicy(redelivery=dt.timedelta(days=3))
    settings = {c.setting for c in changes_of(app, reviewed)}
    assert {"horizon", "margin", "retention.redelivery", "retention.retention"} <= settings


def test_a_replay_window_longer_than_the_evidence(table_inbox: inboxguard.Inbox) -> None:
    app = make_app(table_inbox)
    app.conf.broker_transport_options = {"visibility_timeout": 8 * 86400}
    (problem,) = problems_of(app)
    assert (problem.field, problem.setting) == ("dedup_window", "visibility_timeout")
    assert "visibility_timeout" in str(problem)


@pytest.mark.parametrize(
    ("options", "setting"),
    [
        ({"acks_late": False, "inbox_accept_early_ack": True}, "acks_late"),
        (
            {"reject_on_worker_lost": False, "inbox_accept_ack_on_worker_lost": True},
            "reject_on_worker_lost",
        ),
        (
            {"acks_on_failure_or_timeout": True, "inbox_accept_ack_on_failure": True},
            "acks_on_failure_or_timeout",
        ),
    ],
)
def test_early_acks(table_inbox: inboxguard.Inbox, options: dict[str, Any], setting: str) -> None:
    early = options.get("acks_late") is False
    with pytest.warns(RuntimeWarning) if early else contextlib.nullcontext():
        app = make_app(table_inbox, **options)
        problems = problems_of(app)
    assert [(p.field, p.setting) for p in problems] == [("delivery_mode", setting)]


def test_a_consumer_named_after_the_module_path(table_inbox: inboxguard.Inbox) -> None:
    app = Celery("tables", broker=REDIS_URL, set_as_current=False)

    @app.task(
        shared=False,
        base=InboxTask,
        inbox=table_inbox,
        inbox_session_factory=sessionmaker(table_inbox.engine),
        inbox_command_id="invoice_id",
    )
    def charge(invoice_id: str) -> None:
        return None

    (problem,) = problems_of(app, f"{__name__}.charge")
    assert (problem.field, problem.setting) == ("identity", "inbox_consumer")


def test_provider_window_shorter_than_the_retries(table_inbox: inboxguard.Inbox) -> None:
    ledger = inboxguard.EffectLedger(table_inbox.engine, table_prefix="gtfx_")
    stripe = inboxguard.known_contract("stripe")  # keys kept 24h, no lookup
    guarantee = inboxguard.Guarantee(provider=stripe, ledger=ledger)
    # 30 retries x Celery's default 180 s step = 90 minutes: inside the window
    app = make_app(table_inbox, max_retries=30, inbox_guarantee=guarantee)
    assert problems_of(app) == []
    app.tasks["billing.charge"].max_retries = 600  # 30 hours of retries
    (problem,) = problems_of(app)
    assert (problem.field, problem.setting) == ("provider_behaviour", "idempotency_window")
    assert "max_retries=600" in problem.message


def test_a_provider_called_through_no_ledger(table_inbox: inboxguard.Inbox) -> None:
    guarantee = inboxguard.Guarantee(provider=inboxguard.known_contract("adyen"))
    app = make_app(table_inbox, inbox_guarantee=guarantee)
    (problem,) = problems_of(app)
    assert (problem.field, problem.setting) == ("reconciliation", "ledger")
    layer = table_of(app).fact("layer")
    assert layer is not None
    assert layer.settings["external"] == "unguarded"


def test_a_declared_derived_field_is_refused(table_inbox: inboxguard.Inbox) -> None:
    guarantee = inboxguard.Guarantee(delivery_mode="exactly once, trust me")
    app = make_app(table_inbox, inbox_guarantee=guarantee)
    # Celery declares the task when the app is finalized (here, on listing it)
    with pytest.raises(inboxguard.ConfigurationError, match="delivery_mode"):
        table_of(app)
