"""docs/api.md carries the public signatures as plain text, and they match the code."""

from __future__ import annotations

import importlib.util

from tests.docs.pages import ROOT

_SPEC = importlib.util.spec_from_file_location(
    "api_signatures", ROOT / "scripts" / "api_signatures.py"
)
assert _SPEC is not None
assert _SPEC.loader is not None
api_signatures = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(api_signatures)


def test_the_signatures_section_matches_the_code() -> None:
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert api_signatures.START in page, "run python scripts/api_signatures.py"
    assert api_signatures.rewritten(page) == page, (
        "docs/api.md's signatures differ from the code: run python scripts/api_signatures.py"
    )


def test_every_public_name_is_listed() -> None:
    import inboxguard

    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    section = page[page.index(api_signatures.START) :]
    missing = [
        name
        for name in inboxguard.__all__
        if not any(
            line.split("(")[0].split(":")[0].split()[-1] == name
            for line in section.splitlines()
            if line.strip()
        )
    ]
    assert not missing
