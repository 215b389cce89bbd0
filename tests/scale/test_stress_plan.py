"""The stress run publishes what its flags say, and refuses flags that cannot make a run."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from benchmarks._stress_checks import make_plan
from benchmarks.stress import parse


def test_st3_the_plan_has_the_asked_duplicates_and_mismatches() -> None:
    plan = make_plan(10_000, 0.30, 0.01, accounts=7, seed=3)
    assert len(plan.bodies) == 10_000
    by_id: defaultdict[str, list[dict]] = defaultdict(list)
    for body in plan.bodies:
        by_id[body["command_id"]].append(body)
    assert len(by_id) == plan.unique == 6_900
    versions = Counter(b["version"] for b in plan.bodies)
    assert versions[2] == len(plan.mismatched) == 100
    for cid, copies in by_id.items():
        first = {k: v for k, v in copies[0].items() if k != "version"}
        assert all({k: v for k, v in c.items() if k != "version"} == first for c in copies)
        if cid in plan.mismatched:  # one message of each payload, no re-send
            assert sorted(c["version"] for c in copies) == [1, 2]
        else:
            assert {c["version"] for c in copies} == {1}
    assert sum(len(c) - 1 for cid, c in by_id.items() if cid not in plan.mismatched) == 3_000
    assert sum(plan.balances.values()) == sum(c[0]["amount"] for c in by_id.values())
    assert plan.bodies != sorted(plan.bodies, key=lambda b: b["command_id"]), "shuffled"
    assert make_plan(10_000, 0.30, 0.01, accounts=7, seed=3) == plan


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--duplicates", "1.5"], "--duplicates"),
        (["--mismatches", "-0.1"], "--mismatches"),
        (["--commands", "0"], "--commands"),
        (["--commands", "10", "--duplicates", "0.6", "--mismatches", "0.3"], "lower the rates"),
        (["--workers", "0"], "--workers"),
        (["--kill-interval", "-1"], "--kill-interval"),
    ],
)
def test_st3_flags_that_cannot_make_a_run_are_refused_by_name(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse(argv)
    assert named in capsys.readouterr().err
