"""A separate process advancing one watermark: ``python watermark_worker.py URL PREFIX SEED``.

Prints ``ready``, waits for a line on stdin (so all processes start together),
then prints one JSON object: the positions it tried with what advance returned, and
the stored position it read after each commit.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import sys

from sqlalchemy import create_engine, select

import inboxguard

POSITIONS = 60


def main() -> None:
    url, prefix, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    engine = create_engine(url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    c = inbox.watermarks.c
    read = select(c.position).where(c.consumer == "billing", c.key == "customer-1")
    positions = list(range(1, POSITIONS + 1))
    random.Random(seed).shuffle(positions)
    results, seen = [], []
    with engine.connect() as conn:  # connect before the barrier: start together, warm
        conn.execute(read)
    print("ready", flush=True)
    sys.stdin.readline()
    for position in positions:
        while True:
            try:
                with engine.begin() as conn:
                    advanced = inbox.advance_watermark(
                        conn, consumer="billing", key="customer-1", position=position
                    )
                break
            except Exception as error:
                if not inboxguard.is_retryable(error):
                    raise
        results.append([position, advanced])
        with engine.connect() as conn:
            seen.append(conn.execute(read).scalar_one())
    engine.dispose()
    print(json.dumps({"results": results, "seen": seen}))


if __name__ == "__main__":
    main()
