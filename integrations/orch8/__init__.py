"""Reference Orch8 external worker: charges each order step once, on PostgreSQL.

Run ``python -m integrations.orch8.worker`` next to an Orch8 engine (``ORCH8_URL``);
the tests run the same wiring against ``inboxguard.testing.orch8.StandInEngine``.
"""
