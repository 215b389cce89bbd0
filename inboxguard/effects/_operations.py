"""Operator paths: reconcile unknown effects by lookup, compensate, resolve by hand."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable

from inboxguard.effects._heartbeat import Heartbeat
from inboxguard.effects._recorder import Recorder
from inboxguard.effects._records import EffectRecord, ReconcileReport
from inboxguard.effects._rules import contract_of, provider_name, refuse_if_leased, why_takeover
from inboxguard.effects._store import receipt_columns
from inboxguard.effects.provider import Provider, ProviderContract, Receipt
from inboxguard.effects.state import EffectState, check_transition
from inboxguard.errors import (
    ConfigurationError,
    EffectOutcomeUnknownError,
    InboxGuardError,
    InvalidTransitionError,
    StaleLeaseError,
)

__all__ = ["compensate", "reconcile", "resolve"]


def _owner(rec: Recorder) -> str:
    return f"{rec.actor()}/{uuid.uuid4().hex[:12]}"


def reconcile(
    rec: Recorder,
    provider: Provider,
    *,
    older_than: dt.timedelta,
    limit: int,
    lease: dt.timedelta,
) -> ReconcileReport:
    """Settle ``provider``'s pending effects by lookup; never send anything."""
    contract = contract_of(provider)
    now = rec.now()
    report = ReconcileReport()
    candidates = rec.store.select(
        states=(EffectState.UNKNOWN, EffectState.PREPARED),
        provider=provider_name(provider, contract),
        updated_before=now - older_than,
        limit=limit,
    )
    for record in candidates:
        report.examined += 1
        try:
            _settle(rec, provider, contract, record, now, lease, report)
        except StaleLeaseError:  # another worker took it over mid-way: it decides
            report.skipped.append(record.effect_key)
    return report


def _settle(
    rec: Recorder,
    provider: Provider,
    contract: ProviderContract,
    record: EffectRecord,
    now: dt.datetime,
    lease: dt.timedelta,
    report: ReconcileReport,
) -> None:
    """Settle one candidate by lookup and file it under its report heading."""
    key = record.effect_key
    try:
        refuse_if_leased(record, now)
    except EffectOutcomeUnknownError:
        report.skipped.append(key)
        return
    held = rec.take_over(record, _owner(rec), lease, why_takeover(record))
    if held is None:
        report.skipped.append(key)
        return
    try:
        found = rec.lookup(held, provider) if contract.supports_lookup else None
    except StaleLeaseError:
        raise
    except InboxGuardError as error:  # the lookup failed or answered nonsense
        report.failed.append((key, str(error)))
        return
    if found is not None:
        rec.finish(held, applied=True, receipt=found, note="found by lookup (reconcile)")
        report.reconciled.append(key)
        return
    window_end = contract.window_end(record.first_sent_at)
    open_window = window_end is None or rec.now() + lease < window_end
    if contract.supports_lookup:
        note = "reconcile: lookup found nothing"
    else:
        note = "reconcile: the provider has no lookup"
    rec.to_unknown(held, "reconcile", None, note=note)
    (report.pending if open_window else report.needs_operator).append(key)


def compensate(
    rec: Recorder,
    effect_key: str,
    compensator: Callable[[EffectRecord], Receipt | None],
    *,
    lease: dt.timedelta,
) -> EffectRecord:
    """Run ``compensator`` on an applied effect (``confirmed``, or ``reconciled``
    as applied) under its lease; record ``compensated``."""
    record = rec.store.read(effect_key, history=True)
    if record is None:
        check_transition(None, EffectState.COMPENSATED, effect_key=effect_key)
        raise AssertionError  # pragma: no cover - check_transition raised
    if record.state is EffectState.COMPENSATED:
        return record
    check_transition(record.state, EffectState.COMPENSATED, effect_key=effect_key)
    if record.state is EffectState.RECONCILED and not record.applied:
        msg = (
            f"effect {effect_key!r} was reconciled as not applied: the provider never"
            " performed it, so there is nothing to compensate"
        )
        raise InvalidTransitionError(
            msg, from_state=str(record.state), to_state="compensated", effect_key=effect_key
        )
    refuse_if_leased(record, rec.now())
    held = rec.take_over(record, _owner(rec), lease, "compensation")
    if held is None:
        msg = f"effect {effect_key!r} changed while compensation started; retry"
        raise EffectOutcomeUnknownError(msg, effect_key=effect_key, state=str(record.state))
    try:
        with Heartbeat(rec, held, lease):  # a compensator slower than its lease keeps it
            receipt = compensator(record)
    except BaseException as error:
        rec.write(
            held,
            held.state,
            {"lease_owner": None, "lease_expires_at": None},
            rec.event("release", rec.now(), f"compensation failed: {error!r}"),
        )
        raise
    values = {
        "lease_owner": None,
        "lease_expires_at": None,
        **receipt_columns(receipt, "compensation"),
    }
    rec.write(held, EffectState.COMPENSATED, values, rec.event("compensate", rec.now()))
    found = rec.store.read(effect_key, history=True)
    assert found is not None
    return found


def resolve(
    rec: Recorder, effect_key: str, *, applied: bool, receipt: Receipt | None, note: str
) -> EffectRecord:
    """Record an operator's verdict on an unknown effect as ``reconciled``."""
    if applied and not isinstance(receipt, Receipt):
        msg = (
            f"resolve({effect_key!r}, applied=True) needs the provider's reference:"
            " pass receipt=Receipt('<reference>') so that later calls can return it"
        )
        raise ConfigurationError(msg)
    record = rec.store.read(effect_key)
    if record is None or record.state is not EffectState.UNKNOWN:
        state = None if record is None else record.state
        what = "does not exist" if record is None else f"is {state}"
        msg = f"effect {effect_key!r} {what}; only an unknown effect can be resolved by hand"
        raise InvalidTransitionError(
            msg,
            from_state=None if state is None else str(state),
            to_state=str(EffectState.RECONCILED),
            effect_key=effect_key,
        )
    refuse_if_leased(record, rec.now())
    held = rec.take_over(record, _owner(rec), dt.timedelta(minutes=1), "operator resolve")
    if held is None:
        msg = f"effect {effect_key!r} changed while it was being resolved; look again"
        raise EffectOutcomeUnknownError(msg, effect_key=effect_key, state=str(record.state))
    rec.finish(held, applied=applied, receipt=receipt, note=f"operator: {note}")
    found = rec.store.read(effect_key, history=True)
    assert found is not None
    return found
