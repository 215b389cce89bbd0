"""One home for every text the library stores for people: error texts, notes,
reasons and receipts' details.

Such text comes from anywhere (an exception quoting a payload, an operator's
note, a provider's answer), and a database refuses some of it: PostgreSQL
refuses a NUL character, every driver refuses a lone surrogate (it has no
UTF-8 form), and MariaDB/MySQL refuse a statement larger than
``max_allowed_packet``. A refused write would lose the fact it records (an
outcome, a refusal), so :func:`storable_text` escapes what a database refuses
and bounds the size; whatever it had to change is logged in full first.
"""

from __future__ import annotations

import logging

__all__ = ["MAX_RECEIPT_DETAILS", "MAX_STORED_TEXT", "error_text", "escaped_text", "storable_text"]

logger = logging.getLogger("inboxguard")

#: The most characters of one error text, note or reason the library stores;
#: a longer one is cut (and logged in full). 64 KiB of characters stays far
#: below MariaDB's smallest ``max_allowed_packet`` even at 4 bytes each.
MAX_STORED_TEXT = 65_536
#: The most characters of a receipt's encoded details the effect ledger
#: stores: at 4 bytes each they stay below MariaDB's default 16 MiB
#: ``max_allowed_packet``. Larger details are replaced by their size.
MAX_RECEIPT_DETAILS = 1_000_000


def escaped_text(text: str) -> str:
    """``text`` with lone surrogates written as ``\\udXXX`` and NUL characters
    as ``\\x00``: what every supported database and driver accepts."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def storable_text(text: str, *, what: str, limit: int | None = MAX_STORED_TEXT) -> str:
    """``text`` as any supported database stores it: escaped (see
    :func:`escaped_text`) and cut to ``limit`` characters with a marker saying
    how much was cut. When the text had to change, the whole of it (escaped) is
    logged at WARNING on the ``inboxguard`` logger, naming ``what`` it is."""
    stored = escaped_text(text)
    if limit is not None and len(stored) > limit:
        marker = f" [... {len(stored) - limit} more characters; the full text is in the log]"
        logger.warning("%s is too long to store (%d characters): %s", what, len(stored), stored)
        return stored[: max(limit - len(marker), 0)] + marker
    if stored != text:
        logger.warning("%s holds characters a database refuses; stored escaped: %s", what, stored)
    return stored


def error_text(
    error: BaseException, *, what: str, prefix: str = "", limit: int | None = MAX_STORED_TEXT
) -> str:
    """``"<prefix>ExceptionType: message"`` made storable; a ``__str__`` that
    raises is replaced by a note rather than losing the record."""
    try:
        message = str(error)
    except Exception:  # a broken __str__ must not lose the outcome it explains
        message = f"<unprintable {type(error).__name__}>"
    return storable_text(f"{prefix}{type(error).__name__}: {message}", what=what, limit=limit)
