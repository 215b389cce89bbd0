"""The measuring rules of benchmarks/_harness.py and the pages they write.

No benchmark runs here: these tests feed the harness known per-round figures
and check what it computes, what it refuses, and what reaches
docs/benchmarks.md and the "Targets at a glance" table. The page and the
results directory are redirected to a temporary directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import _harness, _report, targets
from benchmarks.__main__ import ORDER, every, module_for
from benchmarks._harness import Load, Ratio, Target

PAGE = "# Benchmarks\n\nMethod.\n\n<!-- bench:other -->\n## Other\n\nkept\n<!-- /bench:other -->\n"


@pytest.fixture
def page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    doc = tmp_path / "benchmarks.md"
    doc.write_text(PAGE)
    monkeypatch.setattr(_report, "DOC", doc)
    return doc


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    found = tmp_path / "results"
    monkeypatch.setattr(_harness, "RESULTS", found)
    return found


def test_rotation_puts_every_variant_in_every_position() -> None:
    variants = ["a", "b", "c"]
    orders = [_harness.rotate(variants, i) for i in range(3)]
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    for position in range(3):
        assert sorted(order[position] for order in orders) == variants
    assert _harness.rotate(variants, 3) == variants
    assert _harness.rotate([], 2) == []


def test_shuffled_orders_change_every_variants_neighbours_and_repeat_per_round() -> None:
    variants = ["a", "b", "c", "d"]
    orders = _harness.shuffled_orders(variants, 200, 3)
    assert len(orders) == 200
    assert all(sorted(order) == variants for order in orders)
    # What a rotation never does: the variant run before "a" changes.
    before_a = {order[order.index("a") - 1] for order in orders if order[0] != "a"}
    assert before_a == {"b", "c", "d"}
    assert sorted({order[0] for order in orders}) == variants
    assert _harness.shuffled_orders(variants, 200, 3) == orders
    assert _harness.shuffled_orders(variants, 200, 4) != orders
    assert variants == ["a", "b", "c", "d"]  # the caller's list is left alone


def test_run_rounds_runs_each_round_in_its_rotated_order() -> None:
    seen: list[list[str]] = []

    def one_round(order: list[str], i: int) -> dict[str, float]:
        seen.append(order)
        return {name: float(10 * i + n) for n, name in enumerate(order)}

    out = _harness.run_rounds(["x", "y"], one_round, 4, progress=False)
    assert seen == [["x", "y"], ["y", "x"], ["x", "y"], ["y", "x"]]
    assert out[1] == {"y": 10.0, "x": 11.0}


def test_a_round_missing_a_variant_is_refused() -> None:
    with pytest.raises(RuntimeError, match=r"round 0 measured no figure for \['y'\]"):
        _harness.run_rounds(["x", "y"], lambda order, i: {"x": 1.0}, 1, progress=False)
    with pytest.raises(ValueError, match="distinct"):
        _harness.run_rounds(["x", "x"], lambda order, i: {"x": 1.0}, 1, progress=False)


def test_ratio_is_the_median_of_per_round_ratios_not_a_ratio_of_medians() -> None:
    # Round 2 ran while the machine was busy: both variants slower.
    per_round = [{"a": 1.0, "b": 1.0}, {"a": 10.0, "b": 5.0}, {"a": 2.0, "b": 4.0}]
    found = _harness.ratio(per_round, "a", "b")
    assert found == Ratio(median=1.0, low=0.5, high=2.0, rounds=3)
    of_medians = _harness.median(per_round, "a") / _harness.median(per_round, "b")
    assert of_medians == 0.5  # what the page must not show
    assert str(found) == "1.00 (0.50-2.00)"
    assert found.format(3) == "1.000 (0.500-2.000)"
    with pytest.raises(ValueError, match="no rounds"):
        _harness.ratio([], "a", "b")


def test_rounds_come_from_the_environment_and_nonsense_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("BENCH_ROUNDS", raising=False)
    assert _harness.rounds() == _harness.MIN_ROUNDS == 5
    assert _harness.rounds(default=9) == 9
    monkeypatch.setenv("BENCH_ROUNDS", "1")
    assert _harness.rounds() == 1
    assert not _harness.publishable(1)
    assert not _harness.publishable(4)
    assert _harness.publishable(5)
    for bad in ("three", "0", "-2", ""):
        monkeypatch.setenv("BENCH_ROUNDS", bad)
        with pytest.raises(ValueError, match="BENCH_ROUNDS="):
            _harness.rounds()


def test_a_smoke_run_prints_its_section_and_leaves_the_page_alone(
    page: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _report.write_section("mine", "Mine", "| a | 1.00 |", load=Load().stop(), rounds=4)
    assert page.read_text() == PAGE
    assert "smoke run, docs/benchmarks.md left alone" in capsys.readouterr().out


def test_a_publishable_run_replaces_only_its_own_section(page: Path) -> None:
    _report.write_section("mine", "Mine", "first", load=Load().stop(), rounds=5)
    _report.write_section("mine", "Mine", "second", load=Load().stop(), rounds=7, command="make x")
    text = page.read_text()
    assert text.startswith(PAGE.rstrip())  # the method and the other section untouched
    assert text.count("<!-- bench:mine -->") == 1
    assert "first" not in text
    assert "second\n<!-- /bench:mine -->" in text
    assert "by `make x`, 7 rounds; load average " in text


def test_a_section_without_rounds_is_written_with_a_warning(
    page: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _report.write_section("legacy", "Legacy", "body")
    assert "<!-- bench:legacy -->" in page.read_text()
    assert "written without rounds=" in capsys.readouterr().err


def test_a_section_name_the_docs_test_cannot_find_is_refused(page: Path) -> None:
    with pytest.raises(ValueError, match="section name 'My Bench'"):
        _report.write_section("My Bench", "Mine", "body", rounds=5)
    assert page.read_text() == PAGE


def _target(median: float, n: int = 5, better: str = "lower") -> Target:
    return Target("b", "guarded / bare", 1.30, better, Ratio(median, median - 0.1, median + 0.1, n))


def test_target_verdicts_and_bad_direction() -> None:
    assert _target(1.30).met
    assert not _target(1.31).met
    assert _target(1.31, better="higher").met
    assert _target(1.46).row() == [
        "guarded / bare",
        "<= 1.30",
        "1.46 (1.36-1.56)",
        "-",
        "**missed**",
    ]
    with pytest.raises(ValueError, match="better='less'"):
        _target(1.0, better="less")


def test_a_target_the_evidence_row_misses_too_is_out_of_reach() -> None:
    """The floor (the evidence row alone, same ratio, same run) decides whether
    a miss is the guard's or the design's."""
    floor = Ratio(1.35, 1.3, 1.4, 5)
    beyond = Target(
        "b", "t", 1.30, "lower", Ratio(1.5, 1.4, 1.6, 5), floor=floor, floor_variant="ev"
    )
    assert beyond.out_of_reach
    assert beyond.row()[3:] == [
        "1.35 (1.30-1.40) (ev)",
        "**missed**, out of reach: its floor (next column) misses it too",
    ]
    within = Target(
        "b", "t", 1.40, "lower", Ratio(1.5, 1.4, 1.6, 5), floor=floor, floor_variant="ev"
    )
    assert not within.out_of_reach
    assert within.row()[4] == "**missed**"
    higher = Target(
        "b", "t", 0.90, "higher", Ratio(0.7, 0.6, 0.8, 5), floor=Ratio(0.85, 0.8, 0.9, 5)
    )
    assert higher.out_of_reach
    assert not _target(1.46).out_of_reach  # no floor timed: a plain miss


def test_targets_table_is_built_from_the_results_files_only(page: Path, results: Path) -> None:
    assert targets.body() is None
    targets.main()
    assert page.read_text() == PAGE  # nothing recorded, nothing written

    load = Load().stop()
    assert not _harness.record("smoke", [_target(1.0)], load, 1)
    assert not results.exists()
    met = Target("inbox", "guarded / bare, 4 workers", 1.40, "lower", Ratio(1.2, 1.1, 1.3, 5))
    missed = Target(
        "peers",
        "vs Powertools, 1 worker",
        1.25,
        "higher",
        Ratio(1.1, 1.0, 1.2, 6),
        floor=Ratio(1.3, 1.2, 1.4, 6),
        floor_variant="evidence row",
    )
    assert _harness.record("inbox", [met], load, 5)
    assert _harness.record("peers", [missed], load, 6, command="python -m benchmarks peers")
    stored = json.loads((results / "peers.json").read_text())
    assert stored["rounds"] == 6
    assert stored["command"] == "python -m benchmarks peers"

    before = (results / "inbox.json").read_text()
    assert not _harness.record("inbox", [_target(9.0, n=1)], load, 1)  # a later smoke run
    assert (results / "inbox.json").read_text() == before

    targets.main()
    section = page.read_text().split("<!-- bench:targets -->")[1]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert rows[0].startswith(
        "| `inbox` | guarded / bare, 4 workers | <= 1.40 | 1.20 (1.10-1.30) | - | met |"
    )
    assert rows[1].startswith(
        "| `peers` | vs Powertools, 1 worker | >= 1.25 | 1.10 (1.00-1.20)"
        " | 1.30 (1.20-1.40) (evidence row) | **missed** |"
    )
    assert "6 rounds" in rows[1]
    assert len(rows) == 2
    assert "<!-- bench:other -->" in page.read_text()


def test_a_target_measured_over_fewer_rounds_than_the_run_is_refused(results: Path) -> None:
    with pytest.raises(ValueError, match=r"\['guarded / bare'\] measured over fewer than 5"):
        _harness.record("b", [_target(1.0, n=3)], Load().stop(), 5)
    assert not results.exists()


def test_a_malformed_results_file_is_named(results: Path) -> None:
    results.mkdir()
    (results / "broken.json").write_text('{"benchmark": "broken"}')
    with pytest.raises(ValueError, match=r"broken.json: not a results file"):
        targets.body()


def test_source_tree_extracts_a_revision_and_refuses_nonsense(tmp_path: Path) -> None:
    with _harness.source_tree("HEAD") as tree:
        assert (tree / "inboxguard" / "__init__.py").exists()
        assert not (tree / "benchmarks").exists()
        kept = tree
    assert not kept.exists()  # nothing left behind
    with pytest.raises(ValueError, match="neither a directory nor a git revision"):
        with _harness.source_tree("no-such-revision-xyz"):
            pass
    with pytest.raises(ValueError, match="holds no inboxguard package"):
        with _harness.source_tree(tmp_path):
            pass


def test_make_bench_runs_every_benchmark_in_order_and_refuses_unknown_names() -> None:
    names = every()
    listed = [name for name in ORDER if name in names]
    assert names[: len(listed)] == listed
    here = Path(_harness.__file__).parent
    for path in here.glob("bench_*.py"):
        assert path.stem.removeprefix("bench_") in names
    assert module_for("ledger") == "benchmarks.bench_ledger"
    assert module_for("nope") is None
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks", "nope"],
        capture_output=True,
        text=True,
        cwd=here.parent,
        check=False,
    )
    assert out.returncode == 1
    assert "no benchmark named ['nope']" in out.stderr
