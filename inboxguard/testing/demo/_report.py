"""The demo's printed tables."""

from __future__ import annotations

from inboxguard.guarantees import guarantees_markdown, guarantees_of
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


def guarantees(inbox: object) -> str:
    """The guarantee table of every handler ``inbox`` guards, derived by the
    library (the Markdown ``inboxguard guarantees`` prints), under a title."""
    tables = guarantees_markdown(guarantees_of(inbox))
    return f"Guarantee table of the demo handler (as `inboxguard guarantees` shows it):\n\n{tables}"
