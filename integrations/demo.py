"""The inboxguard demo: ``make demo`` (the same as ``inboxguard demo``).

Plays the failure stories one after another against a billing handler on
SQLite in a temporary directory, with an in-memory at-least-once broker,
real worker threads and a fake payment provider: duplicate deliveries, two
workers racing, a crash after the provider accepted, an expired lease, a
retry after the provider's window, an ambiguous timeout, a mismatched
payload, a replay older than retention. ``--db URL`` and ``--broker URL`` play
them on PostgreSQL / MariaDB and on Redis / RabbitMQ. Exits 1 when any
guarantee failed. The stories live in :mod:`inboxguard.testing.demo`.
"""

from __future__ import annotations

import sys

from inboxguard.testing.demo import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
