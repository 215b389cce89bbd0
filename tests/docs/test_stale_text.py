"""The docs name what the code has: every extra, every importable transport
path, one database variable, and the options a documented command requires."""

from __future__ import annotations

import importlib
import re
import tomllib

from tests.docs.pages import DOCS, ROOT, pages

#: Extras that are not for users' projects.
_INTERNAL_EXTRAS = {"dev", "bench"}
_DOTTED = re.compile(r"`(inboxguard\.adapters\.[\w.]+)(?:\(|`)")


def test_the_quickstart_lists_every_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    text = (DOCS / "quickstart.md").read_text(encoding="utf-8")
    listed = text[text.index("Extras:") : text.index("Python 3.11+")]
    missing = sorted(e for e in set(extras) - _INTERNAL_EXTRAS if f"`{e}`" not in listed)
    assert not missing, f"docs/quickstart.md's list of extras lacks {missing}"


def test_every_adapter_path_the_docs_name_imports() -> None:
    """A dotted ``inboxguard.adapters...`` name in a page is a module or an
    attribute of one (no private module a user cannot import by that name)."""
    bad = []
    for page in pages():
        for dotted in _DOTTED.findall(page.read_text(encoding="utf-8")):
            module, _, attr = dotted.rpartition(".")
            if any(part.startswith("_") for part in dotted.split(".")):
                bad.append(f"{page.relative_to(ROOT)}: {dotted} (private)")
                continue
            try:
                importlib.import_module(dotted)
            except ImportError:
                if not hasattr(importlib.import_module(module), attr):
                    bad.append(f"{page.relative_to(ROOT)}: {dotted}")
    assert not bad, "\n".join(bad)


def test_one_database_variable() -> None:
    """Pages export $INBOXGUARD_DB_URL; the old name appears only as deprecated."""
    bad = []
    for page in pages():
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if "INBOXGUARD_DATABASE_URL" in line and "deprecat" not in line:
                bad.append(f"{page.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not bad, "\n".join(bad)


def test_documented_settle_commands_give_their_required_reason() -> None:
    bad = []
    for page in pages():
        joined = page.read_text(encoding="utf-8").replace("\\\n", " ")  # continued lines
        for number, line in enumerate(joined.splitlines(), 1):
            settles = re.search(r"inboxguard quarantine (resolve|release|replay) ", line)
            if settles and "--reason" not in line:
                bad.append(f"{page.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not bad, "\n".join(bad)
