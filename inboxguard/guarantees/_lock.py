"""The lock file: the reviewed tables, committed, and what changed since.

The lock is the JSON form of every table, sorted and indented so that its
diff reads like any other reviewed contract. Comparing the running tables
with it names each handler, field and setting that changed, with the
reviewed value and the current one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from inboxguard._core.guarantee import FIELDS, Guarantee, GuaranteeFact
from inboxguard.errors import ConfigurationError
from inboxguard.guarantees._checks import Contradiction

__all__ = ["LOCK_VERSION", "lock_changes", "lock_text", "read_lock"]

#: The lock file's format version (its top-level ``inboxguard_guarantees_lock``).
LOCK_VERSION = 1


def lock_text(guarantees: Sequence[Guarantee]) -> str:
    """The lock file's content for ``guarantees`` (stable: sorted keys and handlers)."""
    tables = sorted((g.to_json() for g in guarantees), key=_key_of)
    document = {"inboxguard_guarantees_lock": LOCK_VERSION, "guarantees": tables}
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def read_lock(text: str, where: str = "lock file") -> list[dict[str, Any]]:
    """The tables of a lock file's content.

    Raises:
        ConfigurationError: the text is not a lock file of this version.
    """
    try:
        document = json.loads(text)
    except ValueError as error:
        msg = f"{where} is not JSON ({error}); write it again with --lock"
        raise ConfigurationError(msg) from error
    if not isinstance(document, Mapping) or document.get("inboxguard_guarantees_lock") != (
        LOCK_VERSION
    ):
        msg = (
            f"{where} is not an inboxguard guarantees lock (version {LOCK_VERSION});"
            " write it again with --lock"
        )
        raise ConfigurationError(msg)
    tables = document.get("guarantees")
    if not isinstance(tables, list) or not all(isinstance(t, Mapping) for t in tables):
        msg = f"{where}: 'guarantees' must be a list of tables"
        raise ConfigurationError(msg)
    return [dict(t) for t in tables]


def lock_changes(
    guarantees: Sequence[Guarantee], locked: Sequence[Mapping[str, Any]]
) -> list[Contradiction]:
    """Every difference between the running tables and the reviewed ones.

    A handler missing from the lock, one no longer declared, and each field
    whose value or settings changed are reported; a changed setting names the
    field, the setting and both values.

    Raises:
        ConfigurationError: a locked table is malformed.
    """
    reviewed = {_key_of(table): table for table in locked}
    found: list[Contradiction] = []
    current = {_key_of(g.to_json()): g for g in guarantees}
    for key, guarantee in sorted(current.items()):
        handler = guarantee.handler or "?"
        table = reviewed.get(key)
        if table is None:
            found.append(
                Contradiction(
                    handler,
                    "handler",
                    "guarantee",
                    f"consumer {guarantee.consumer!r} is not in the lock: review its table and"
                    " write the lock again",
                )
            )
            continue
        for name in FIELDS:
            old = GuaranteeFact.from_json(table.get(name), f"lock {handler}.{name}")
            new = guarantee.fact(name) or GuaranteeFact.unknown("not derived")
            found += _field_changes(handler, name, old, new)
    for key in sorted(set(reviewed) - set(current)):
        found.append(
            Contradiction(
                key[0],
                "handler",
                "guarantee",
                f"consumer {key[1]!r} is in the lock but no longer declared: review its"
                " removal and write the lock again",
            )
        )
    return found


def _field_changes(
    handler: str, name: str, old: GuaranteeFact, new: GuaranteeFact
) -> list[Contradiction]:
    found = []
    for setting in sorted(set(old.settings) | set(new.settings)):
        before = old.settings.get(setting, _ABSENT)
        after = new.settings.get(setting, _ABSENT)
        if before != after or type(before) is not type(after):
            found.append(
                Contradiction(
                    handler,
                    name,
                    setting,
                    f"{setting} changed since the review: {_show(before)} (lock) ->"
                    f" {_show(after)} (now)",
                )
            )
    if not found and (old.value != new.value or old.source != new.source):
        found.append(
            Contradiction(
                handler,
                name,
                name,
                f"changed since the review: {_show(old.value)} ({old.source}, lock) ->"
                f" {_show(new.value)} ({new.source}, now)",
            )
        )
    return found


_ABSENT = object()


def _show(value: object) -> str:
    if value is _ABSENT:
        return "absent"
    if value is None:
        return "unknown"
    return json.dumps(value)


def _key_of(table: Mapping[str, Any]) -> tuple[str, str]:
    return (str(table.get("handler")), str(table.get("consumer")))
