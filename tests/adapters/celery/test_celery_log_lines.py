"""P20 (Celery): what a real ``celery worker`` logs, at INFO, for a refusal it handled
and for a duplicate: one line each; the refusal's traceback only at DEBUG."""

from __future__ import annotations

from typing import Any

import pytest

from tests.adapters.celery.conftest import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql]

CONSUMER = "reference.transfers"


def test_p20_celery_a_mismatch_is_one_warning_line_and_a_duplicate_one_info_line(
    reference: Any,
) -> None:
    ref = reference("rabbitmq")
    worker = ref.worker(concurrency=1)
    ref.publish([("tr-x", "acct-1", 10)])
    wait_until(lambda: ref.check().rows == 1, 30, "the first delivery applied")
    ref.publish([("tr-x", "acct-1", 10)])  # a duplicate
    ref.publish([("tr-x", "acct-1", 99)])  # the same command, another payload
    inbox = ref.inbox()
    [record] = wait_until(lambda: inbox.quarantined(CONSUMER), 30, "a quarantine record")
    ref.publish([("tr-y", "acct-1", 1)])  # a later task: the refusal's lines are all out
    wait_until(lambda: ref.check().rows == 2, 30, "the later delivery applied")
    worker.stop()
    log = worker.log()
    after_ready = log[log.index(" ready.") :].splitlines()[1:]
    # Everything between the refused task's "received" and the next one's.
    received = [i for i, line in enumerate(after_ready) if line.endswith(" received")]
    refusal = [line for line in after_ready[received[2] + 1 : received[3]] if line.strip()]
    assert len(refusal) == 1, "\n".join(after_ready)
    [line] = refusal
    assert "WARNING" in line
    for field in (
        f"consumer={CONSUMER}",
        "command_id=tr-x",
        "reason=payload_mismatch",
        f"stored_digest={record.stored_digest}",
        f"incoming_digest={record.incoming_digest}",
        "rejected without requeue",
        "docs/errors.md#payload-mismatch",
    ):
        assert field in line
    assert "Traceback" not in log
    duplicates = [line for line in after_ready if "duplicate:" in line]
    assert len(duplicates) == 1
    assert "INFO" in duplicates[0]
    assert f"consumer={CONSUMER} command_id=tr-x" in duplicates[0]
