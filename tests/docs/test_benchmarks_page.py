"""Every figure on docs/benchmarks.md comes from a command.

A figure may stand in a table row only inside a ``<!-- bench:NAME -->``
section, and every such section must be one that some benchmark writes: a
``write_section("NAME", ...)`` call in benchmarks/ (found by searching the
code at test time, so a benchmark added later brings its section with it).
A hand-written table of figures outside a section, or a section no command
writes (left behind by a removed benchmark, or typed by hand), fails here.
"""

from __future__ import annotations

import ast
import re

from tests.docs.pages import ROOT

PAGE = ROOT / "docs" / "benchmarks.md"
OPEN = re.compile(r"<!-- bench:([a-z0-9_-]+) -->")
CLOSE = re.compile(r"<!-- /bench:([a-z0-9_-]+) -->")
FIGURE = re.compile(r"\d")


def _names_in(source: str) -> set[str]:
    """The section names ``write_section`` is called with in ``source``: a string
    literal, or a module-level name bound to one."""
    tree = ast.parse(source)
    constants = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        first = node.args[0]
        if called != "write_section":
            continue
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.add(first.value)
        elif isinstance(first, ast.Name) and first.id in constants:
            found.add(constants[first.id])
    return found


def _written_names() -> set[str]:
    return {
        name for path in (ROOT / "benchmarks").rglob("*.py") for name in _names_in(path.read_text())
    }


def test_section_names_are_found_as_literals_or_module_constants() -> None:
    source = (
        'NAME = "peers"\n'
        "def main():\n"
        '    write_section("batch", "t", "b")\n'
        '    _report.write_section(NAME, "t", "b")\n'
        '    other("ignored", "t")\n'
    )
    assert _names_in(source) == {"batch", "peers"}


def _outside_sections(text: str) -> list[tuple[int, str]]:
    """The page's lines outside every bench section, with their line numbers."""
    out, inside = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        opened, closed = OPEN.search(line), CLOSE.search(line)
        if opened:
            assert inside is None, f"line {number}: section {opened[1]} opens inside {inside}"
            inside = opened[1]
        elif closed:
            assert closed[1] == inside, f"line {number}: closes {closed[1]}, open is {inside}"
            inside = None
        elif inside is None:
            out.append((number, line))
    assert inside is None, f"section {inside} is never closed"
    return out


def _hand_written(text: str) -> list[str]:
    return [
        f"docs/benchmarks.md:{number}: {line}"
        for number, line in _outside_sections(text)
        if line.lstrip().startswith("|") and FIGURE.search(line)
    ]


def test_the_check_sees_a_figure_outside_and_not_inside_a_section() -> None:
    page = (
        "| what | ratio |\n|---|---|\n| typed | 1.30 |\n"
        "<!-- bench:x -->\n| made | 1.20 |\n<!-- /bench:x -->\n| also typed | 2 |\n"
    )
    assert _hand_written(page) == [
        "docs/benchmarks.md:3: | typed | 1.30 |",
        "docs/benchmarks.md:7: | also typed | 2 |",
    ]


def test_no_table_row_with_a_figure_outside_a_bench_section() -> None:
    offenders = _hand_written(PAGE.read_text())
    assert not offenders, (
        "hand-written figures (write them from a benchmark with"
        " benchmarks._report.write_section):\n" + "\n".join(offenders)
    )


def test_every_section_is_written_by_a_command() -> None:
    written = _written_names()
    assert {"targets", "ledger", "outbox", "purge", "redis", "telemetry"} <= written
    on_page = OPEN.findall(PAGE.read_text())
    assert len(on_page) == len(set(on_page)), "a section appears twice"
    orphans = sorted(set(on_page) - written)
    assert not orphans, f"sections no benchmark writes (no write_section call): {orphans}"


def test_the_targets_table_is_the_generated_one() -> None:
    assert "targets" in OPEN.findall(PAGE.read_text())
