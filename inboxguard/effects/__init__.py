"""The external-effect ledger: one provider effect per business intent.

``state`` is the pure state machine, ``provider`` the provider protocol and
contracts, ``contracts`` the shipped contracts of well-known providers,
``schema`` and ``store`` the tables and their fenced writes, and ``ledger`` the
:class:`EffectLedger` that ties them together.
"""
