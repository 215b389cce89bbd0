"""Reference FastStream worker guarded by the inbox, on RabbitMQ, Redis Streams
or NATS JetStream (chosen by ``INBOXGUARD_BROKER_URL``: ``amqp://``,
``redis://`` or ``nats://``).

Run ``python -m integrations.faststream.worker`` and
``python -m integrations.faststream.producer COUNT [COPIES]``; both read their
settings from the environment (see ``integrations/payments.py``).
"""
