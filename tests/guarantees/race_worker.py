"""A race participant, run as its own process by test_g04_races.py.

Usage: python race_worker.py URL PREFIX WORKER COMMANDS SHARED [ISOLATION]

Applies COMMANDS commands: SHARED of them from a pool every worker shares (in
a worker-specific order), the rest its own. Each command adds its amount to
account 0 and writes a ledger row, inside the inbox guard. In-progress claims
and retryable database errors are retried later, as a broker would redeliver.

Start barrier: the worker connects, prints ``ready`` and waits for a line on
stdin, so every worker starts claiming at the same instant. The winner of a
shared command keeps its transaction open for HOLD after its changes, which
widens the window in which others claim the same command; a shared claim that
took at least half of HOLD to return waited for another transaction.
Prints one JSON line: applied, duplicates, retries, waited.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import sys
import time
from collections import deque

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from inboxguard import Inbox, is_retryable
from tests.helpers import apply, business_tables

HOLD = 0.02


def amount_of(command_id: str) -> int:
    """Each command's amount is derived from its ID, so the expected sum is known."""
    return int(command_id.rsplit("-", 1)[1]) + 1


def main() -> None:
    url, prefix, worker, commands, shared = sys.argv[1:6]
    isolation = sys.argv[6] if len(sys.argv) > 6 else None
    n, s, w = int(commands), int(shared), int(worker)
    opts = {"isolation_level": isolation} if isolation else {}
    engine = create_engine(url, **opts)
    inbox = Inbox(
        engine,
        retention=dt.timedelta(days=1),
        table_prefix=prefix,
        lock_timeout=dt.timedelta(seconds=2),
    )
    _, accounts, ledger = business_tables(prefix)
    pool = [f"shared-{i}" for i in range(s)]
    random.Random(w).shuffle(pool)
    queue = deque(pool + [f"own{w}-{i}" for i in range(n - s)])
    random.Random(w + 100).shuffle(queue)
    applied = duplicates = retries = waited = 0
    with engine.connect():
        pass  # connected before the barrier
    print("ready", flush=True)
    sys.stdin.readline()
    while queue:
        cid = queue.popleft()
        shared_cmd = cid.startswith("shared-")
        try:
            with Session(engine) as session, session.begin():
                started = time.monotonic()
                payload = {"id": cid}
                with inbox.guard(session, consumer="race", command_id=cid, payload=payload) as e:
                    if shared_cmd and time.monotonic() - started >= HOLD / 2:
                        waited += 1
                    if e.duplicate:
                        duplicates += 1
                        continue
                    apply(session.connection(), accounts, ledger, cid, amount_of(cid))
                    if shared_cmd:
                        time.sleep(HOLD)  # the winner holds its claim open
            applied += 1
        except Exception as error:
            if not is_retryable(error):
                raise
            retries += 1
            queue.append(cid)
    report = {"applied": applied, "duplicates": duplicates, "retries": retries, "waited": waited}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
