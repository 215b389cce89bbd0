"""K7: a kombu consumer survives a database outage (issue 20).

The reference worker, a real process on RabbitMQ and Redis, reaches
PostgreSQL through a TCP proxy the test cuts and restores. Before the fix the
last attempt's quarantine write raised out of the callback (or the message
was rejected without its record) and ``ConsumerMixin.run`` stopped.
"""

from __future__ import annotations

import pytest
from sqlalchemy import make_url

from tests.adapters.generic_support import payments, wait_until
from tests.outbox._proxy import TcpProxy

from .conftest import KombuSetup

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql]

COMMANDS = 15


def test_k7_an_outage_longer_than_the_retries_requeues_and_keeps_consuming(
    kombu_setup: KombuSetup,
) -> None:
    """Every attempt fails while the database is down (3 attempts, 200 ms
    apart, then the record cannot be written): each message is requeued, the
    consumer keeps running, and once the database is back every command is
    applied exactly once and nothing is quarantined."""
    url = make_url(kombu_setup.config.db_url)
    proxy = TcpProxy(url.port or 5432)
    proxy.start()
    proxied = url.set(port=proxy.port).render_as_string(hide_password=False)
    prefix = kombu_setup.config.prefix
    try:
        with kombu_setup.worker(INBOXGUARD_DB_URL=proxied) as worker:
            proxy.cut()
            kombu_setup.send(*({"command_id": f"out-{i}", "amount": i} for i in range(COMMANDS)))
            log = worker.log
            wait_until(
                lambda: log.read_text().count("goes back to the broker") >= COMMANDS,
                60,
                "every message requeued past its last attempt",
            )
            assert worker.proc is not None
            assert worker.proc.poll() is None  # still consuming
            proxy.start()
            wait_until(
                lambda: payments(kombu_setup.engine, prefix) == (COMMANDS, COMMANDS),
                60,
                "every command applied",
            )
            assert worker.proc is not None
            assert worker.proc.poll() is None
    finally:
        proxy.cut()
    assert kombu_setup.inbox.quarantined("payments") == []
    wait_until(lambda: kombu_setup.queue_depth() == 0, 30, "the queue drained")
