"""The inbox's store-independent guarantees, once, on every store of the registry.

The tests are the conformance suite shipped in :mod:`inboxguard.testing.conformance`
(G1..G8 of docs/guarantees.md, X9-X10 of docs/testing.md); the ``store``
fixture (``conftest.py``) runs them on each store of ``registry.py``. The
store-specific tests (SQL dialect details, Redis eviction, ...) live beside
their store.
"""

from __future__ import annotations

from inboxguard.testing.conformance import InboxStoreSuite


class TestEveryStore(InboxStoreSuite):
    """The conformance suite on SQLAlchemy (sync and async), Django and Redis."""
