"""PR1: the crash scenarios of ``benchmarks/peers.py``, in a small configuration.

Real worker processes, a real SIGKILL right after the handler's commit, and a
ledger row count afterwards: inboxguard SQL applies each command once in every
scenario, where the Redis lock (and Powertools, when the ``bench`` extra is
installed) apply it twice once their time to live has passed.
"""

from __future__ import annotations

import importlib.util

import pytest

from benchmarks._peers_crash import SCENARIOS, Outcome, play
from benchmarks._peers_variants import DEDUP, VARIANTS, Peers, Place, create, drop_keys
from tests.conftest import REDIS_URL, require_service, unique

POWERTOOLS = importlib.util.find_spec("aws_lambda_powertools") is not None


def _play(pg_url: str, variants: list[str]) -> dict[tuple[str, str], Outcome]:
    require_service("redis")
    outcomes = play(pg_url, REDIS_URL, unique("pr") + "_", variants, ttl=2, timeout=30)
    return {(o.variant, o.scenario): o for o in outcomes}


@pytest.mark.e2e
@pytest.mark.filterwarnings(
    "ignore:Couldn't determine the remaining time left",  # Powertools outside Lambda
    "ignore:RedisCachePersistenceLayer will be removed",  # also said of its new name
)
def test_pr1_inboxguard_applies_once_where_a_lock_applies_twice(pg_url: str) -> None:
    """Killed after commit, killed after return, or redelivered late: inboxguard's
    ledger holds one row per command and its evidence committed with the
    mutation; the celery-once-style lock ran the handler again every time."""
    variants = ["inboxguard", "lock", *(["powertools"] if POWERTOOLS else [])]
    by = _play(pg_url, variants)
    for scenario in SCENARIOS:
        guarded = by["inboxguard", scenario]
        assert guarded.applied == 1, guarded
        assert guarded.record_at_kill == "completed", guarded
        assert guarded.redelivery == "skipped as a duplicate", guarded
        locked = by["lock", scenario]
        assert locked.applied == 2, locked
        assert locked.redelivery == "ran again", locked
    if POWERTOOLS:
        # Killed before it wrote COMPLETED: its record was not complete, and
        # once the record expired the redelivery ran the handler again.
        crashed = by["powertools", "commit"]
        assert (crashed.applied, crashed.redelivery) == (2, "ran again"), crashed
        assert crashed.record_at_kill != "completed", crashed
        # Killed after COMPLETED and redelivered inside the expiry: answered.
        assert by["powertools", "return"].applied == 1, by["powertools", "return"]
        # Redelivered after the expiry: applied again.
        assert by["powertools", "late"].applied == 2, by["powertools", "late"]


@pytest.mark.filterwarnings(
    "ignore:Couldn't determine the remaining time left",
    "ignore:RedisCachePersistenceLayer will be removed",
)
def test_pr1_each_variant_answers_an_immediate_duplicate_as_the_table_says(pg_url: str) -> None:
    """The benchmark's duplicate pass measures real duplicates: delivered twice in a
    row, the deduplicating variants apply once (Powertools answers with the stored
    result), the bare handler and the released lock apply twice."""
    require_service("redis")
    place = Place(pg_url, REDIS_URL, unique("pr") + "_")
    create(place, accounts=1)
    peers = Peers(place)
    try:
        for variant in VARIANTS:
            if variant == "powertools" and not POWERTOOLS:
                continue
            cid = f"twice-{variant}"
            first = peers.handlers[variant](cid)
            again = peers.handlers[variant](cid)
            expected = 1 if variant in DEDUP else 2
            assert peers.applied(cid) == expected, variant
            if variant in {"inboxguard", "redis-inbox", "powertools"}:
                assert again == first == {"applied": cid}, variant  # the stored result
    finally:
        peers.close()
        drop_keys(place)
