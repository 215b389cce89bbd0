"""The delivery script decides a delivery without I/O: driven here by plain
functions standing in for a framework, it asks for the run and the
quarantine records a settlement needs, in order, and nothing else."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest

from inboxguard import InvalidCommandError, PayloadMismatchError
from inboxguard.adapters._drive import drive
from inboxguard.adapters._evidence import Refused
from inboxguard.adapters._script import Reading, Record, Rules, Run, Step, deliver
from inboxguard.adapters._sent_time import SentTimeCheck

_LOG = logging.getLogger("tests.script")


def _rules(**kwargs: Any) -> Rules:
    sent = SentTimeCheck("c", require=False, stamp="stamp it", option="require", logger=_LOG)
    return Rules(sent, **kwargs)


def _reading(command_id: Any = "cmd-1", *, last: bool = False, **kwargs: Any) -> Reading:
    record = Refused("c", None, "msg-1", {"id": "cmd-1"}, (), {"attempt": 1})

    def get_id() -> Any:
        if isinstance(command_id, Exception):
            raise command_id
        return command_id

    return Reading(record, get_id, lambda: None, lambda _: last, **kwargs)


class Framework:
    """Records what the script asked for; ``written`` answers each Record."""

    def __init__(self, raises: Exception | None = None, *, written: bool = True) -> None:
        self.raises = raises
        self.written = written
        self.asked: list[Run | Record] = []

    def run(self, request: Run) -> None:
        self.asked.append(request)
        if self.raises is not None:
            raise self.raises

    def record(self, request: Record) -> bool:
        self.asked.append(request)
        return self.written


def _last_record(fw: Framework) -> Record:
    asked = fw.asked[-1]
    assert isinstance(asked, Record)
    return asked


def test_a_committed_delivery_is_acked_with_no_record() -> None:
    fw = Framework()
    settled = drive(deliver(_reading(), _rules(retry_failures=True)), fw.run, fw.record)
    assert settled.step is Step.ACK
    assert [type(r) for r in fw.asked] == [Run]
    assert fw.asked[0] == Run("cmd-1", {"id": "cmd-1"}, None, {"attempt": 1})


def test_an_unreadable_delivery_is_recorded_under_its_message_then_rejected() -> None:
    fw = Framework()
    reading = _reading(InvalidCommandError("no ID"))
    settled = drive(deliver(reading, _rules(refuse_unreadable=True)), fw.run, fw.record)
    assert (settled.step, settled.name) == (Step.REJECT, "msg-1")
    (asked,) = fw.asked  # never run
    assert isinstance(asked, Record)
    assert asked.refused.command_id is None


def test_a_refusal_no_record_holds_goes_back_to_the_broker() -> None:
    error = PayloadMismatchError(
        consumer="c", command_id="cmd-1", stored_digest="a", incoming_digest="b"
    )
    fw = Framework(error, written=False)
    settled = drive(deliver(_reading(), _rules(retry_failures=True)), fw.run, fw.record)
    assert settled.step is Step.REQUEUE
    assert [type(r) for r in fw.asked] == [Run, Record]


def test_a_last_failed_attempt_is_quarantined_as_exhausted_then_given_up() -> None:
    fw = Framework(RuntimeError("boom"))
    reading = _reading(last=True)
    settled = drive(deliver(reading, _rules(retry_failures=True)), fw.run, fw.record)
    assert settled.step is Step.GIVE_UP
    assert _last_record(fw).reason == "retries_exhausted"


@pytest.mark.parametrize(("written", "step"), [(True, Step.FAIL), (False, Step.REQUEUE)])
def test_a_failure_for_the_framework_failure_path_is_quarantined_first(
    written: bool, step: Step
) -> None:
    fw = Framework(RuntimeError("boom"), written=written)
    settled = drive(deliver(_reading(), _rules(record_failures=True)), fw.run, fw.record)
    assert settled.step is step
    assert _last_record(fw).reason == "handler_failed"


def test_a_direct_call_records_nothing() -> None:
    fw = Framework(RuntimeError("boom"))
    reading = _reading(direct=True)
    settled = drive(deliver(reading, _rules(record_failures=True)), fw.run, fw.record)
    assert settled.step is Step.FAIL
    assert [type(r) for r in fw.asked] == [Run]


def test_filed_under_keeps_every_other_field() -> None:
    """``Refused.filed_under`` is ``dataclasses.replace`` spelled out: a field
    added to ``Refused`` must be carried over there too."""
    values = {field.name: object() for field in dataclasses.fields(Refused)}
    refused = Refused(**values)  # type: ignore[arg-type]
    assert refused.filed_under("cmd-1") == dataclasses.replace(refused, command_id="cmd-1")
