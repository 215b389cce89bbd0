"""The external-effect ledger: one provider effect per business intent.

Public modules: ``state`` (the pure state machine), ``provider`` (the provider
protocol, receipt and contract) and ``contracts`` (the shipped contracts of
well-known providers). Private ones: ``_rules`` (decisions that need no
database), ``_store`` (fenced writes), ``_recorder`` (fenced recording of
outcomes), ``_operations`` (reconcile, compensate, resolve) and ``_ledger``
(the :class:`EffectLedger` that ties them together). Its tables and statements
live in :mod:`inboxguard.sql`.
"""

from __future__ import annotations

from inboxguard.effects._ledger import EffectLedger
from inboxguard.effects._records import EffectRecord, EffectTransition, ReconcileReport

__all__ = ["EffectLedger", "EffectRecord", "EffectTransition", "ReconcileReport"]
