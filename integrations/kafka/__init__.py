"""Reference Kafka worker guarded by the inbox, on aiokafka (one record at a time,
or one polled batch per transaction with ``INBOXGUARD_KAFKA_BATCH=1``).

Run ``python -m integrations.kafka.worker`` and
``python -m integrations.kafka.producer COUNT [COPIES]``; both read their
settings from the environment (see ``integrations/payments.py``);
``INBOXGUARD_BROKER_URL`` is the bootstrap address (``host:port``) and
``INBOXGUARD_QUEUE`` the topic.
"""
