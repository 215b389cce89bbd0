"""MariaDB/MySQL: the statements the server commits before it runs them.

*Features*: besides ``COMMIT`` and ``ROLLBACK``, MariaDB and MySQL end the
current transaction with an implicit commit before most DDL and
administration statements (``CREATE``/``ALTER``/``DROP`` of anything but a
temporary table, ``TRUNCATE``, ``RENAME``, ``LOCK TABLES``/``UNLOCK TABLES``,
``BEGIN``/``START TRANSACTION``, ``GRANT``, ``FLUSH``, ``ANALYZE``/``CHECK``/
``OPTIMIZE``/``REPAIR TABLE``, ``SET autocommit = 1``, ...), as MariaDB's
"SQL statements that cause an implicit commit" lists them. Inside a guarded
block each of them would commit the claim with half of the block, so the
guard refuses them before they reach the server.
"""

from __future__ import annotations

from inboxguard.sql.dialects.base.boundary import ends_transaction, leading_words

__all__ = ["commits_implicitly"]

#: Statements that commit whatever follows their first word.
_ALWAYS = frozenset(
    {
        "ALTER",
        "BEGIN",
        "CACHE",
        "CHANGE",
        "FLUSH",
        "GRANT",
        "INSTALL",
        "LOCK",
        "OPTIMIZE",
        "RENAME",
        "REPAIR",
        "RESET",
        "REVOKE",
        "SHUTDOWN",
        "TRUNCATE",
        "UNINSTALL",
        "UNLOCK",
        "XA",
    }
)
#: First word -> second words that make it commit.
_WHEN = {
    "ANALYZE": frozenset({"TABLE", "TABLES", "NO_WRITE_TO_BINLOG", "LOCAL"}),
    "CHECK": frozenset({"TABLE", "TABLES"}),
    "LOAD": frozenset({"INDEX"}),
    "START": frozenset({"TRANSACTION", "SLAVE", "REPLICA", "ALL"}),
    "STOP": frozenset({"SLAVE", "REPLICA", "ALL"}),
}
_AUTOCOMMIT = frozenset({"AUTOCOMMIT", "@@AUTOCOMMIT", "@@SESSION.AUTOCOMMIT"})
_ON = frozenset({"1", "ON", "TRUE"})


def commits_implicitly(statement: str) -> bool:
    """True when MariaDB/MySQL would commit the current transaction before (or
    by) running ``statement``."""
    if ends_transaction(statement):
        return True
    return any(_commits(words) for words in leading_words(statement, 5))


def _commits(words: tuple[str, ...]) -> bool:
    first, rest = words[0], words[1:]
    if first in _ALWAYS:
        return True
    if first in {"CREATE", "DROP"}:  # a temporary table stays inside the transaction
        return "TEMPORARY" not in rest[:3]
    if first in _WHEN:
        return bool(rest) and rest[0] in _WHEN[first]
    if first == "SET":
        return _sets_autocommit(rest)
    return False


def _sets_autocommit(rest: tuple[str, ...]) -> bool:
    if rest[:1] == ("PASSWORD",):
        return True
    if rest[:1] == ("SESSION",):
        rest = rest[1:]
    return len(rest) >= 3 and rest[0] in _AUTOCOMMIT and rest[1] == "=" and rest[2] in _ON
