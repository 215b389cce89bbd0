"""Code in the docs is never inline: every Python sample is a file the suite runs.

Rules, over README.md and every page under docs/ (new pages included):

- A fenced Python block (``python``, ``py``, ``pycon``...) holds only snippet
  includes, ``--8<-- "examples/<file>.py"`` or ``...<file>.py:<section>"``,
  of files under docs/examples/ (tests/docs/test_examples.py runs them).
- README.md is read on GitHub, which does not expand includes, so its Python
  blocks carry the text itself, announced by ``<!-- example: <file>.py -->``
  on the line before the fence, and must equal that file byte for byte.
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
import re
import shlex

import pytest

from inboxguard.cli import build_parser
from tests.docs.pages import EXAMPLES, ROOT, blocks, example_text, pages, snippet

PYTHON = {"python", "py", "python3", "py3", "pycon", "ipython"}
SHELL = {"sh", "bash", "shell", "console", "zsh"}
_README_MARK = re.compile(r"^<!-- example: (?P<file>[\w.-]+\.py)(?::(?P<section>[\w-]+))? -->$")


def test_python_blocks_are_snippet_includes() -> None:
    """No fenced Python block in the docs carries code of its own."""
    offenders = []
    for page in pages():
        lines = page.read_text(encoding="utf-8").splitlines()
        for block in blocks(page):
            if block.lang not in PYTHON:
                continue
            if page.name == "README.md" and page.parent == ROOT:
                mark = _README_MARK.match(lines[block.line - 2].strip()) if block.line > 1 else None
                if mark is None:
                    offenders.append(
                        f"{block.where}: no <!-- example: FILE.py --> before the fence"
                    )
                elif block.text != example_text(mark["file"], mark["section"]):
                    offenders.append(f"{block.where}: differs from docs/examples/{mark['file']}")
                continue
            for line in block.body:
                if line.strip() and snippet(line) is None:
                    offenders.append(f"{block.where}: inline code {line.strip()!r}")
                    break
    assert not offenders, "move the code into docs/examples/:\n" + "\n".join(offenders)


def test_every_fence_names_its_language() -> None:
    """An untagged fence could hide a sample from the check above."""
    untagged = [b.where for page in pages() for b in blocks(page) if not b.lang]
    assert not untagged, "tag these fences (text, sh, python...):\n" + "\n".join(untagged)


def _included() -> set[str]:
    found = set()
    for page in pages():
        for block in blocks(page):
            for line in block.body:
                spec = snippet(line)
                if spec:
                    found.add(spec[0])
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    found |= {m["file"] for line in readme if (m := _README_MARK.match(line.strip()))}
    return found


def test_every_include_exists_and_every_example_is_shown() -> None:
    """Includes point at real files; no example sits in docs/examples/ unseen."""
    included = _included()
    missing = sorted(f for f in included if not (EXAMPLES / f).is_file())
    assert not missing, f"included but not in docs/examples/: {missing}"
    shown = {p.name for p in EXAMPLES.glob("*.py")}
    unseen = sorted(shown - included)
    assert not unseen, f"docs/examples/ files no page includes: {unseen}"


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
