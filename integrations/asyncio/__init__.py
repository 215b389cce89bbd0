"""Reference asyncio consumer: aio-pika on RabbitMQ, SQLAlchemy AsyncSession.

Run ``python -m integrations.asyncio.consumer`` and ``python -m integrations.asyncio.producer``;
both read their settings from the environment (see ``integrations/payments.py``).
"""
