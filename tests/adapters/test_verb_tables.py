"""Each consumer driven by the shared redelivery policy settles every step it
can decide, by the one step -> verb table next to its driver."""

from __future__ import annotations

import importlib

import pytest

from inboxguard.adapters._redelivery import Step


@pytest.mark.parametrize(
    ("framework", "driver"),
    [
        ("kombu", "kombu._settle"),
        ("aio_pika", "aio_pika._settle"),
        ("faststream", "faststream._flow"),
        ("aiokafka", "kafka._settle"),
        ("orch8", "orch8._settle"),
    ],
)
def test_every_step_has_a_verb(framework: str, driver: str) -> None:
    pytest.importorskip(framework)
    settle = importlib.import_module(f"inboxguard.adapters.{driver}")
    assert set(settle.VERBS) == set(Step)
    # A copy is published (Kafka: the record is held in place, Orch8: failed
    # retryably) for a retry and for a requeue; a refusal and a last failed
    # attempt are both rejected (dead-lettered, failed for good).
    assert settle.VERBS[Step.RETRY] is settle.VERBS[Step.REQUEUE]
    assert settle.VERBS[Step.REJECT] is settle.VERBS[Step.GIVE_UP]
    assert len({settle.VERBS[Step.ACK], settle.VERBS[Step.RETRY], settle.VERBS[Step.REJECT]}) == 3


@pytest.mark.parametrize(
    ("framework", "driver"), [("celery", "celery._settle"), ("dramatiq", "dramatiq._settle")]
)
def test_every_step_of_the_script_has_a_framework_verb(framework: str, driver: str) -> None:
    """Celery and Dramatiq have a failure path of their own: a failure is
    handed to it, never rejected like a refusal."""
    pytest.importorskip(framework)
    settle = importlib.import_module(f"inboxguard.adapters.{driver}")
    assert set(settle.VERBS) == set(Step)
    assert settle.VERBS[Step.FAIL] is not settle.VERBS[Step.REJECT]
