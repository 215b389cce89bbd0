"""Each republishing consumer settles every step the redelivery policy can
decide, by the one outcome -> verb table next to its driver."""

from __future__ import annotations

import pytest

from inboxguard.adapters._redelivery import Step


@pytest.mark.parametrize("module", ["kombu", "aio_pika"])
def test_every_step_has_a_verb(module: str) -> None:
    pytest.importorskip(module)
    settle = __import__(f"inboxguard.adapters.{module}._settle", fromlist=["VERBS"])
    assert set(settle.VERBS) == set(Step)
    # A copy is published for a retry and for a requeue; a refusal and a
    # last failed attempt are both rejected.
    assert settle.VERBS[Step.RETRY] is settle.VERBS[Step.REQUEUE]
    assert settle.VERBS[Step.REJECT] is settle.VERBS[Step.GIVE_UP]
    assert len({settle.VERBS[Step.ACK], settle.VERBS[Step.RETRY], settle.VERBS[Step.REJECT]}) == 3
