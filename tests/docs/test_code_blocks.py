"""Every sample the docs show is a file the suite runs, and the page carries
its text, so a page reads as plain Markdown (in a clone, on a code host, in
an editor) and cannot drift from the sample.

Rules, over README.md and every page under docs/ (new pages included):

- A fenced Python block (``python``, ``py``, ``pycon``...) shows a file of
  docs/examples/ (tests/docs/test_examples.py runs them): announced by
  ``<!-- example: <file>.py -->`` (or ``<file>.py:<section>``, one
  ``# --8<-- [start:<section>]`` ... ``[end:<section>]`` part of it) on the
  line before the fence, its body equal to that file or section byte for
  byte, section marker lines left out. Any fenced block so announced (the
  ``ini`` of migrations.md too) is held to the same rule.
- The older form, a block holding only snippet includes
  (``--8<-- "examples/<file>.py[:section]"``), is still accepted (the site
  expands it) so pages written that way keep building, except in README.md,
  which the code host shows unexpanded; test_pages_show_samples_inline
  reports each such block as a warning with the line to write instead.
- Every fence names its language (``text`` for output and diagrams), so no
  Python hides in an untagged block.
- Shell blocks: each line that runs ``inboxguard ...`` must be accepted by the
  installed command's argument parser, so a renamed command or option fails
  here. In any other block (output shown as ``text``), a line starting with
  the prompt ``$ inboxguard`` is checked the same way; a synopsis without the
  prompt (``inboxguard quarantine list [--consumer NAME]``) is not. The
  ``alembic`` lines of migrations.md are run by test_migrations_doc.py.
- Every file in docs/examples/ is shown by some page.
"""

from __future__ import annotations

import contextlib
import io
import shlex
import warnings

import pytest

from inboxguard.cli import build_parser
from tests.docs.pages import EXAMPLES, ROOT, blocks, example_mark, example_text, pages, snippet

PYTHON = {"python", "py", "python3", "py3", "pycon", "ipython"}
SHELL = {"sh", "bash", "shell", "console", "zsh"}


def _is_include_only(body: tuple[str, ...]) -> bool:
    lines = [line for line in body if line.strip()]
    return bool(lines) and all(snippet(line) is not None for line in lines)


def test_python_blocks_show_a_sample_verbatim() -> None:
    """Each Python block (and each announced block) equals the sample it names."""
    offenders = []
    for page in pages():
        readme = page.name == "README.md" and page.parent == ROOT
        for block in blocks(page):
            mark = example_mark(block)
            if mark is not None:
                if not (EXAMPLES / mark[0]).is_file():
                    offenders.append(f"{block.where}: no docs/examples/{mark[0]}")
                elif block.text != example_text(*mark):
                    shown = mark[0] + (f":{mark[1]}" if mark[1] else "")
                    offenders.append(f"{block.where}: differs from docs/examples/{shown}")
                continue
            if block.lang not in PYTHON:
                continue
            if _is_include_only(block.body) and not readme:
                continue  # the older form, reported by test_pages_show_samples_inline
            offenders.append(
                f"{block.where}: Python without <!-- example: FILE.py --> before the fence"
                " (put the code in docs/examples/FILE.py and paste it here)"
            )
    assert not offenders, "\n".join(offenders)


def test_pages_show_samples_inline() -> None:
    """Report (as warnings, never a failure) blocks that still include their
    sample instead of showing it: they read as a bare include in a clone."""
    for page in pages():
        for block in blocks(page):
            if example_mark(block) is None and _is_include_only(block.body):
                spec = snippet(next(line for line in block.body if line.strip()))
                assert spec is not None
                name = spec[0] + (f":{spec[1]}" if spec[1] else "")
                warnings.warn(
                    f"{block.where}: an include; write <!-- example: {name} --> before the"
                    " fence and the sample's text inside it",
                    UserWarning,
                    stacklevel=1,
                )


def test_every_fence_names_its_language() -> None:
    """An untagged fence could hide a sample from the check above."""
    untagged = [b.where for page in pages() for b in blocks(page) if not b.lang]
    assert not untagged, "tag these fences (text, sh, python...):\n" + "\n".join(untagged)


def _included() -> set[str]:
    found = set()
    for page in pages():
        for block in blocks(page):
            mark = example_mark(block)
            if mark is not None:
                found.add(mark[0])
            for line in block.body:
                spec = snippet(line)
                if spec:
                    found.add(spec[0])
    return found


def test_every_include_exists_and_every_example_is_shown() -> None:
    """Marks and includes point at real files; no example sits in docs/examples/ unseen."""
    included = _included()
    missing = sorted(f for f in included if not (EXAMPLES / f).is_file())
    assert not missing, f"shown but not in docs/examples/: {missing}"
    shown = {p.name for p in EXAMPLES.glob("*.py")}
    unseen = sorted(shown - included)
    assert not unseen, f"docs/examples/ files no page shows: {unseen}"


def _inboxguard_lines() -> list[tuple[str, list[str]]]:
    found = []
    for page in pages():
        for block in blocks(page):
            prompt_only = block.lang not in SHELL  # text blocks: only `$ inboxguard` lines
            pending, start = "", 0
            for offset, raw in enumerate(block.body, 1):
                if prompt_only and not (pending or raw.strip().startswith("$ ")):
                    continue
                line = raw.strip().removeprefix("$ ")
                if not pending:
                    start = offset
                if line.endswith("\\"):  # a continued command
                    pending += line[:-1] + " "
                    continue
                words = shlex.split(pending + line, comments=True)
                pending = ""
                if words[:1] == ["inboxguard"]:
                    found.append((f"{block.path.relative_to(ROOT)}:{block.line + start}", words))
    return found


def test_documented_inboxguard_commands_parse() -> None:
    """Every ``inboxguard`` command line in a shell block is one the CLI accepts."""
    lines = _inboxguard_lines()
    if not lines:
        pytest.skip("no inboxguard command in any shell block")
    bad = []
    for where, words in lines:
        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
                build_parser().parse_args(words[1:])
        except SystemExit as exc:
            if exc.code not in (0, None):  # --help exits 0
                bad.append(f"{where}: {shlex.join(words)}\n    {stderr.getvalue().strip()}")
    assert not bad, "documented commands the CLI rejects:\n" + "\n".join(bad)
