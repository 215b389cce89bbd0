"""The external-effect ledger: one provider effect per business intent.

``state`` is the pure state machine; ``provider`` the provider protocol, receipt
and contract; ``contracts`` the shipped contracts of well-known providers;
``schema`` and ``store`` the tables and their fenced writes; ``rules`` the
decisions that need no database; ``recorder`` the fenced recording of outcomes;
``operations`` reconcile, compensate and resolve; ``ledger`` the
:class:`EffectLedger` that ties them together.
"""
