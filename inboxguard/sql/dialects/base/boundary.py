"""Statements that end the transaction, told apart before they run.

A guarded block must never end the transaction that holds its claim. The
guard's statement filter asks the database's :attr:`Database.ends_transaction`
whether a statement would do so, before the driver sees it. This module
holds the reading every database shares (quoted text and comments removed,
then the leading words of each ``;``-separated statement) and the statements
that end a transaction everywhere: ``COMMIT``, ``END``, ``ROLLBACK`` (not
``ROLLBACK TO``), ``ABORT`` and ``PREPARE TRANSACTION``. A database whose
server commits on its own before other statements (MariaDB/MySQL) adds them
in its own folder.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["ends_transaction", "leading_words"]

#: Quoted strings and identifiers, and comments: removed before the words are read.
_HIDDEN = re.compile(
    r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|--[^\n]*|#[^\n]*|/\*.*?\*/",
    re.DOTALL,
)
_WORD = re.compile(r"[A-Za-z0-9_@.$]+|\S")
#: Only statements that begin with one of these can end a transaction: a fast
#: exit for the DML that makes up nearly every statement of a handler.
_TRANSACTION_WORDS = frozenset({"COMMIT", "END", "ROLLBACK", "ABORT", "PREPARE"})


def leading_words(statement: str, count: int = 4) -> Iterator[tuple[str, ...]]:
    """The first ``count`` words (upper case) of each statement in ``statement``."""
    text = _HIDDEN.sub(" ", statement) if any(c in statement for c in "'\"`-#/") else statement
    for piece in text.split(";"):
        words = tuple(w.upper() for w in _WORD.findall(piece)[:count])
        if words:
            yield words


def ends_transaction(statement: str) -> bool:
    """True when ``statement`` (one or several, ``;``-separated) would commit or
    end the current transaction on any database."""
    return any(_ends(words) for words in leading_words(statement))


def _ends(words: tuple[str, ...]) -> bool:
    first = words[0]
    if first not in _TRANSACTION_WORDS:
        return False
    if first == "ROLLBACK":  # ROLLBACK TO [SAVEPOINT] name keeps the transaction
        return len(words) < 2 or words[1] != "TO"
    if first == "PREPARE":  # PostgreSQL two-phase: the transaction is no longer the session's
        return len(words) > 1 and words[1] == "TRANSACTION"
    return True
