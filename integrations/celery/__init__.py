"""Reference Celery app guarded by inboxguard (copy it as a starting point).

``settings.py`` reads the environment, ``business.py`` holds the business
tables (an account balance and a ledger), ``tasks.py`` the guarded task,
``app.py`` the Celery app the worker runs, ``producer.py`` publishes commands::

    INBOXGUARD_DB_URL=postgresql+psycopg://postgres@127.0.0.1/app \\
    INBOXGUARD_BROKER_URL=redis://127.0.0.1:6379/0 \\
    celery -A integrations.celery.app worker -Q inboxguard-reference -c 2
"""
