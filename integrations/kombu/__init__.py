"""Reference kombu consumer: a ``ConsumerProducerMixin`` worker guarded by the inbox.

Run ``python -m integrations.kombu.worker`` and ``python -m integrations.kombu.producer``;
both read their settings from the environment (see ``config.py``).
"""
