"""The persistence layer: every SQLAlchemy table and every per-database statement.

One module per database under :mod:`inboxguard.sql.dialects`, found through one
registry that refuses an unknown database. The services above (inbox, outbox,
effects) hold no SQL text of their own.
"""
