"""Reference Dramatiq app: a shipping actor guarded by ``InboxMiddleware``.

``worker.py`` is the module a ``dramatiq`` worker process loads; ``producer.py``
sends commands; ``settings.py`` reads the environment both share; ``model.py``
holds the business table and the inbox.
"""
