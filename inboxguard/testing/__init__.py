"""inboxguard's fault-injection kit: prove your own handler effectively once.

An opt-in pytest plugin. Load it with ``-p inboxguard.testing`` on the command
line or ``pytest_plugins = ["inboxguard.testing"]`` in a ``conftest.py``;
installing inboxguard never loads it into other test runs (no entry point).

Fixtures (each test gets its own): ``inboxguard_database`` (an Engine on a
throwaway database: SQLite, or a database created on the server of
``--inboxguard-db URL`` / ``INBOXGUARD_TEST_DB``), ``inboxguard_inbox``,
``inboxguard_ledger``, ``inboxguard_outbox`` (schemas created),
``inboxguard_clock`` (a :class:`ManualClock` they all share),
``inboxguard_provider`` (a :class:`FakeProvider`) and ``inboxguard_kit`` (a
:class:`FaultKit` wired to them).

The classes and :func:`assert_effectively_once` work without pytest too
(the demo uses them); the fixtures are defined only where pytest is installed.

PYTEST_DONT_REWRITE: the kit writes its own assertion messages, and a test
module may import it before pytest loads it as a plugin (``pytest_plugins``
in the module itself), which would otherwise warn.
"""

from __future__ import annotations

import importlib.util

from inboxguard._core.faults import FaultPoint
from inboxguard.testing._cases import FaultKit
from inboxguard.testing._clock import ManualClock
from inboxguard.testing._provider import FakeProvider
from inboxguard.testing._record import CaseRecord, EffectivelyOnceError, assert_effectively_once
from inboxguard.testing._tap import Crash, crash_at

__all__ = [
    "CaseRecord",
    "Crash",
    "EffectivelyOnceError",
    "FakeProvider",
    "FaultKit",
    "FaultPoint",
    "ManualClock",
    "assert_effectively_once",
    "crash_at",
]

if importlib.util.find_spec("pytest") is not None:  # the fixtures need pytest; the rest does not
    from inboxguard.testing._plugin import (  # noqa: F401 - pytest finds them here
        inboxguard_clock,
        inboxguard_database,
        inboxguard_inbox,
        inboxguard_kit,
        inboxguard_ledger,
        inboxguard_outbox,
        inboxguard_provider,
        pytest_addoption,
    )
