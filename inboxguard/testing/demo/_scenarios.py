"""The eight failure stories the demo plays, each with the verdict it expects."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from inboxguard._core.faults import FaultPoint
from inboxguard.testing._cases import FaultKit
from inboxguard.testing._record import CaseRecord, EffectivelyOnceError, assert_effectively_once
from inboxguard.testing.demo._app import LEASE, Billing

__all__ = ["SCENARIOS", "Scenario"]

MESSAGE = {"invoice": 42, "amount": 1500}


@dataclass(frozen=True)
class Scenario:
    """A story: its title, whether its provider has a lookup, how it is played
    with the kit, and the check of its outcome (problems found, empty when it held)."""

    title: str
    play: Callable[[FaultKit, Billing], CaseRecord]
    check: Callable[[CaseRecord, Billing], list[str]]
    lookup: bool = True


def _once(record: CaseRecord, app: Billing, **expected: object) -> list[str]:
    """Effectively once: one inbox row, one receipt, one effect, one charge row."""
    problems = []
    try:
        assert_effectively_once(record, **expected)  # type: ignore[arg-type]
    except EffectivelyOnceError as error:
        problems += str(error).splitlines()[1:]
    if app.charge_rows() != 1:
        problems.append(f"app: {app.charge_rows()} charge rows, expected 1")
    return [p.strip() for p in problems]


def _settled_by_hand(record: CaseRecord, app: Billing) -> list[str]:
    """After the window without lookup: nothing re-sent, the effect left
    ``unknown`` for an operator, the command dead-lettered."""
    problems = []
    if app.provider.effects != 1:
        problems.append(f"provider: {app.provider.effects} effects, expected 1 (no blind re-send)")
    if record.ledger_state != "unknown":
        problems.append(f"ledger: {record.ledger_state}, expected unknown (reconcile by hand)")
    if not record.outcomes[-1].endswith("ReconciliationRequiredError"):
        problems.append(f"last delivery {record.outcomes[-1]!r}, expected ReconciliationRequired")
    return problems


def _quarantined(reason: str, rows: str) -> Callable[[CaseRecord, Billing], list[str]]:
    def check(record: CaseRecord, app: Billing) -> list[str]:
        problems = []
        if app.provider.effects != 1 or app.charge_rows() != 1:
            problems.append(
                f"{app.provider.effects} provider effects and {app.charge_rows()} charge rows,"
                " expected 1 and 1"
            )
        if record.inbox_state != f"{rows}, quarantined ({reason})":
            problems.append(f"inbox: {record.inbox_state}, expected {rows} + {reason} quarantine")
        if not record.outcomes[-1].startswith("dead-lettered"):
            problems.append(f"last delivery {record.outcomes[-1]!r}, expected dead-lettered")
        return problems

    return check


def _ambiguous(kit: FaultKit, app: Billing) -> CaseRecord:
    """The answer is lost: ``unknown``; the reconciler settles it by lookup;
    the redelivery then gets the stored receipt without a new request."""
    app.provider.fail_next("accept_then_timeout")
    first = FaultKit(
        kit.inbox, ledger=kit.ledger, provider=kit.provider, clock=kit.clock, max_deliveries=1
    )
    first.courier = kit.courier
    before = first.deliver(app.charge, MESSAGE)
    effect = app.ledger.get(f"invoice-{MESSAGE['invoice']}/charge")
    app.clock.advance(minutes=5)
    report = app.ledger.reconcile(app.provider, older_than=dt.timedelta(minutes=5), lease=LEASE)
    after = kit.deliver(app.charge, MESSAGE)
    after.deliveries += before.deliveries
    was = "no effect" if effect is None else str(effect.state)
    settled = f"(reconciler: {was}, {len(report.reconciled)} reconciled)"
    after.outcomes = [*before.outcomes, settled, *after.outcomes]
    return after


SCENARIOS = (
    Scenario(
        "duplicate deliveries",
        lambda kit, app: kit.deliver_twice(app.charge, MESSAGE),
        _once,
    ),
    Scenario(
        "two workers racing",
        lambda kit, app: kit.deliver_concurrently(app.charge, MESSAGE, workers=2),
        _once,
    ),
    Scenario(
        "a crash after the provider accepted",
        lambda kit, app: kit.crash(app.charge, MESSAGE, at=FaultPoint.PROVIDER_ACCEPTED),
        _once,
    ),
    Scenario(
        "an expired lease",
        lambda kit, app: kit.expire_lease(app.charge, MESSAGE),
        _once,
    ),
    Scenario(
        "a retry after the provider's window",
        lambda kit, app: kit.retry_after_window(app.charge, MESSAGE),
        _settled_by_hand,
        lookup=False,
    ),
    Scenario(
        "an ambiguous timeout, unknown until reconciled",
        _ambiguous,
        lambda record, app: _once(record, app, ledger_state="reconciled"),
    ),
    Scenario(
        "a mismatched payload",
        lambda kit, app: kit.deliver_mismatched(app.charge, MESSAGE, {**MESSAGE, "amount": 9999}),
        _quarantined("payload_mismatch", "committed"),
    ),
    Scenario(
        "a replay older than retention",
        lambda kit, app: kit.replay_after_retention(app.charge, MESSAGE, sent_at_key="sent_at"),
        _quarantined("beyond_retention", "absent"),
    ),
)
