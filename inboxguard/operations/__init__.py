"""The operator read model: one home for what the CLI and dashboards show.

Functions over an ``Engine`` and a table prefix, returning frozen
dataclasses whose times are aware UTC datetimes. Reads never change a row;
the settling actions (:func:`release_quarantine`, :func:`resolve_quarantine`)
record who acted, why and when, in the transaction that changes the record.
"""

from __future__ import annotations

from inboxguard.operations._explain import explain
from inboxguard.operations._quarantine import (
    quarantine_count,
    quarantine_list,
    quarantine_show,
    release_quarantine,
    resolve_quarantine,
)
from inboxguard.operations._records import (
    CommandExplanation,
    ConsumerStats,
    EffectStats,
    OutboxStats,
    QuarantineDetail,
    Stats,
)
from inboxguard.operations._stats import stats

__all__ = [
    "CommandExplanation",
    "ConsumerStats",
    "EffectStats",
    "OutboxStats",
    "QuarantineDetail",
    "Stats",
    "explain",
    "quarantine_count",
    "quarantine_list",
    "quarantine_show",
    "release_quarantine",
    "resolve_quarantine",
    "stats",
]
