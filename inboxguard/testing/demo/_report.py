"""The demo's printed tables."""

from __future__ import annotations

import datetime as dt

from inboxguard._core.retention import RetentionPolicy
from inboxguard.testing._record import CaseRecord

__all__ = ["guarantees", "table"]


def table(record: CaseRecord, verdict: str) -> str:
    """One story's counts as a two-row table, indented."""
    cells = {**record.row(), "verdict": verdict}
    head = [str(k) for k in cells]
    values = [str(v) for v in cells.values()]
    widths = [max(len(h), len(v)) for h, v in zip(head, values, strict=True)]
    lines = (
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in (head, values)
    )
    return "\n".join(f"    {line}" for line in lines)


def _days(delta: dt.timedelta) -> str:
    hours = delta.total_seconds() / 3600
    return f"{hours / 24:g} days" if hours >= 24 else f"{hours:g} hours"


def guarantees(consumer: str, retention: RetentionPolicy, lease: dt.timedelta) -> str:
    """The demo handler's guarantees, as plain text.

    (When ``inboxguard.Guarantee`` tables exist, print the handler's table
    from there instead of this hand-written one.)
    """
    rows = [
        ("one charge row per invoice", f"in this database, for {_days(retention.horizon)}"),
        ("one provider effect per invoice", "re-sent only with the same key inside its window"),
        ("a lost answer is never guessed", "unknown until a lookup or an operator settles it"),
        ("a crashed call is taken over", f"after its {lease.total_seconds():g} s lease, fenced"),
        ("a conflicting payload is refused", "quarantined; nothing sent"),
        ("a replay older than retention", "refused when the message carries its sent time"),
    ]
    width = max(len(what) for what, _ in rows)
    lines = [f"Guarantees of the demo handler ({consumer}):"]
    lines += [f"  {what.ljust(width)}  {when}" for what, when in rows]
    return "\n".join(lines)
