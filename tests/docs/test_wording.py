""" "Exactly once" appears only with its boundary, as docs/guarantees.md promises.

The rule, applied to every sentence of README.md and docs/**/*.md (code
blocks and inline code aside) that contains "exactly once" or "exactly-once"
in any case, even split across lines:

- **disclaimed**: the phrase is quoted (``"exactly once"``, curly quotes or
  backticks) or the sentence negates it before it comes (not, never, no,
  nor, without, ...n't, within the four words before it): it names what is
  not promised; or
- **bounded**: the same sentence names a layer (inbox, database,
  transaction, ledger, evidence, commit) AND a condition (within, while, as
  long as, unless, provided, if, when, until, after, horizon, retention).

Anything else is an offender, listed as file:line with the sentence.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.pages import ROOT, pages, prose_lines

PHRASE = re.compile(r"exactly[\s-]+once", re.IGNORECASE)
QUOTED = re.compile(r"[\"“`]exactly[\s-]+once[\"”`]", re.IGNORECASE)
NEGATION = re.compile(r"\b(not|never|no|nor|without|cannot)\b|n't\b", re.IGNORECASE)
LAYER = re.compile(r"\b(inbox|database|transaction|ledger|evidence|commit(s|ted)?)\b", re.I)
CONDITION = re.compile(
    r"\b(within|while|as long as|unless|provided|if|when|until|after|horizon|retention)\b", re.I
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*(\[])")
_NEGATION_WINDOW = 4  # words before the phrase that may negate it
_INLINE_CODE = re.compile(r"``?[^`]*?exactly[_]once[^`]*``?")


def _paragraphs(path: Path) -> list[list[tuple[int, str]]]:
    """The prose paragraphs of ``path`` as (line number, text) lines; a table
    row, a list item and a heading start a paragraph of their own."""
    found: list[list[tuple[int, str]]] = []
    previous = -1
    for number, line in prose_lines(path):
        text = line.strip()
        if not text:
            previous = -1
            continue
        starts_block = text.startswith(("|", "- ", "* ", "#")) or re.match(r"\d+\. ", text)
        if previous != number - 1 or starts_block or found[-1][0][1].startswith("|"):
            found.append([])
        found[-1].append((number, _INLINE_CODE.sub("CODE", text)))
        previous = number
    return found


def _allowed(sentence: str) -> bool:
    phrase = PHRASE.search(sentence)
    assert phrase is not None
    if QUOTED.search(sentence):
        return True
    before = " ".join(sentence[: phrase.start()].split()[-_NEGATION_WINDOW:])
    if NEGATION.search(before):
        return True
    return bool(LAYER.search(sentence) and CONDITION.search(sentence))


def offenders(paths: list[Path], root: Path = ROOT) -> list[str]:
    """file:line and sentence of each unbounded "exactly once"."""
    found = []
    for path in paths:
        for paragraph in _paragraphs(path):
            text, starts = "", []
            for number, line in paragraph:
                starts.append((len(text), number))
                text += line + " "
            offset = 0
            for sentence in _SENTENCE_END.split(text):
                offset = text.index(sentence, offset)
                phrase = PHRASE.search(sentence)
                if phrase and not _allowed(sentence):
                    at = offset + phrase.start()
                    line = max(n for start, n in starts if start <= at)
                    found.append(f"{path.relative_to(root)}:{line}: {sentence.strip()}")
                offset += len(sentence)
    return found


def test_exactly_once_appears_only_with_its_boundary() -> None:
    """Every page passes the rule in this module's docstring."""
    bad = offenders(pages())
    assert not bad, (
        "name the layer and the condition in the same sentence, or say it is not promised:\n"
        + "\n".join(bad)
    )


def test_the_rule_catches_a_bare_claim(tmp_path: Path) -> None:
    """The check itself: a bare claim is caught with its line; a disclaimer, a
    quotation and a bounded statement pass."""
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n"
        "Our consumer processes every message\nexactly once.\n\n"
        'We never promise "exactly once" delivery.\n\n'
        "It is not exactly-once delivery.\n\n"
        "Each command commits exactly once in the inbox's database while its evidence is kept.\n\n"
        "```python\nprint('exactly once')\n```\n",
        encoding="utf-8",
    )
    found = offenders([page], root=tmp_path)
    assert found == ["page.md:4: Our consumer processes every message exactly once."]
