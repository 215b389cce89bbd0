"""C29 and D22 beside pipelines: a delivery whose value goes on to a next task
(a Celery link, chain or chord; a Dramatiq pipeline) keeps its result, since a
duplicate of it would hand the stored value on; the same delivery alone does not."""

from __future__ import annotations

import pytest

from inboxguard.adapters._results import celery_reads, dramatiq_reads


def test_c29_a_celery_delivery_with_a_next_task_keeps_its_result() -> None:
    celery = pytest.importorskip("celery")
    from celery.app.task import Context

    app = celery.Celery("readers", broker="memory://", set_as_current=False)

    @app.task(ignore_result=True)
    def step(x: int) -> int:
        return x

    alone = Context(called_directly=False, is_eager=False)
    assert celery_reads(step, alone) is False
    for name in ("callbacks", "chain", "chord"):
        nxt = Context(called_directly=False, is_eager=False, **{name: [step.s().freeze()]})
        assert celery_reads(step, nxt) is True, name


def test_d22_a_dramatiq_message_piped_into_an_actor_keeps_its_result() -> None:
    dramatiq = pytest.importorskip("dramatiq")
    from dramatiq.brokers.stub import StubBroker

    broker = StubBroker()

    @dramatiq.actor(broker=broker)
    def step(x: int) -> int:
        return x

    alone = step.message(1)
    piped = step.message_with_options(args=(1,), pipe_target=step.message(2).asdict())
    ignored = step.message_with_options(
        args=(1,), pipe_target=step.message(2).asdict(), pipe_ignore=True
    )
    assert dramatiq_reads(broker, alone) is False
    assert dramatiq_reads(broker, piped) is True
    assert dramatiq_reads(broker, ignored) is False
