"""Guarantee tables per handler, derived from the running configuration.

:func:`guarantees_of` lists every guarded handler of an application with its
table filled in; :func:`contradictions_of` names each setting that breaks a
table; :func:`lock_text` and :func:`lock_changes` write the reviewed tables and
name what changed since. The derivation reads what the adapters report
(``inboxguard._core.handlers``) and imports no framework.
"""

from __future__ import annotations

from collections.abc import Sequence

from inboxguard._core.guarantee import Guarantee
from inboxguard.guarantees._app import handlers_of
from inboxguard.guarantees._checks import Contradiction, contradictions
from inboxguard.guarantees._derive import derive
from inboxguard.guarantees._lock import LOCK_VERSION, lock_changes, lock_text, read_lock
from inboxguard.guarantees._render import markdown

__all__ = [
    "LOCK_VERSION",
    "Contradiction",
    "contradictions_of",
    "guarantees_markdown",
    "guarantees_of",
    "lock_changes",
    "lock_text",
    "read_lock",
]


def guarantees_of(app: object) -> list[Guarantee]:
    """The guarantee table of every guarded handler of ``app`` (a Celery app, a
    Dramatiq broker, an Inbox, a module, or an object or list holding them),
    each field derived from the configuration as it is now, or declared, or
    unknown.

    Raises:
        ConfigurationError: ``app`` has no guarded handler, or a handler's
            configuration cannot be read (for example no Retries middleware).
    """
    return [derive(facts) for facts in handlers_of(app)]


def contradictions_of(app: object) -> list[Contradiction]:
    """Every contradiction in ``app``'s tables, one per setting to change: a
    dedup window shorter than a replay window, a provider idempotency window
    shorter than the retry horizon without a lookup, early acks, a consumer
    name derived from a module path, a provider called through no ledger.

    Raises:
        ConfigurationError: as :func:`guarantees_of`.
    """
    return [c for facts in handlers_of(app) for c in contradictions(facts)]


def guarantees_markdown(guarantees: Sequence[Guarantee]) -> str:
    """The tables as Markdown, one per handler, with the lost-ack example and
    the case that remains unknown."""
    return markdown(guarantees)
