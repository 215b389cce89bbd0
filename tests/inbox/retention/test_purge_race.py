"""A purge racing four claiming workers loses no evidence."""

from __future__ import annotations

import threading

import inboxguard
from tests.inbox.retention.helpers import DAY, seed, stored_ids, wait_until

WORKERS = 4
PER_WORKER = 40


def worker(inbox: inboxguard.Inbox, n: int, young: list[str], log: dict, errors: list) -> None:
    """Claim fresh commands, and redeliveries of unexpired ones, retrying when busy."""
    try:
        for i in range(PER_WORKER):
            for consumer, command_id in (("live", f"w{n}-{i}"), ("seed", young[i % len(young)])):
                while True:
                    try:
                        with (
                            inbox.engine.begin() as conn,
                            inbox.guard(
                                conn, consumer=consumer, command_id=command_id, payload={}
                            ) as entry,
                        ):
                            if not entry.duplicate:
                                entry.result = n
                        break
                    except Exception as error:
                        if not inboxguard.is_retryable(error):
                            raise
                log.setdefault(consumer, []).append((command_id, entry.duplicate))
    except BaseException as error:  # reported to the test thread
        errors.append(error)


def test_purge_racing_four_workers_loses_no_evidence(box: inboxguard.Inbox, clock) -> None:
    expired = [f"old-{i}" for i in range(1500)]
    young = [f"young-{i}" for i in range(40)]
    seed(box, expired, processed_at=clock.now - 20 * DAY, result=None)
    seed(box, young, processed_at=clock.now - 5 * DAY)
    # young rows' results are past result_ttl: the purge compacts them while
    # workers read them as duplicates
    logs: list[dict] = [{} for _ in range(WORKERS)]
    errors: list[BaseException] = []
    threads = [
        threading.Thread(target=worker, args=(box, n, young, logs[n], errors))
        for n in range(WORKERS)
    ]
    for thread in threads:
        thread.start()
    try:

        def claimed() -> int:
            return sum(len(log.get("live", [])) for log in logs)

        wait_until(lambda: claimed() >= 8 or bool(errors))
        before = claimed()
        report = box.purge(batch_size=50)
        during = claimed() - before
    finally:
        for thread in threads:
            thread.join(timeout=60)
    assert not errors, errors
    assert during > 0  # the workers really claimed while the purge ran
    assert report.deleted == len(expired)
    # a result row a worker held (a duplicate's locking read) was skipped, not waited
    # for; the next purge compacts it
    again = box.purge(batch_size=50)
    assert again.deleted == 0
    assert report.results_dropped + again.results_dropped == len(young)
    fresh = {f"w{n}-{i}" for n in range(WORKERS) for i in range(PER_WORKER)}
    assert stored_ids(box, "live") == fresh  # every claim's evidence survived
    assert stored_ids(box, "seed") == set(young)  # unexpired evidence untouched
    redeliveries = [dup for log in logs for _, dup in log["seed"]]
    assert len(redeliveries) == WORKERS * PER_WORKER
    assert all(redeliveries)  # each redelivery of an unexpired command stayed a duplicate
    assert all(not dup for log in logs for _, dup in log["live"])
